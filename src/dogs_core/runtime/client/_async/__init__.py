"""The async sources of truth: each module generates its sync twin in ../_sync/."""

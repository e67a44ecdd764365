"""Plumbing: what every wing of the runtime stands on and no wing owns.

Settings, the telemetry hub, clocks and the loop's primitives, the lock keeper and its
watchdogs, change watching, group commits, the store wrappers, the blocking portal, the bounded
retry of transient store errors, clock sync against the store and workflow advance (the last
three with generated sync twins in ``_sync/``). It imports no other wing.
"""

"""Django apps for tests/integrations/test_django.py."""

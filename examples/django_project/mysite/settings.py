"""Settings of the example project: Django on MongoDB (django-mongodb-backend) with Dogs.

The MongoDB server comes from ``$MONGODB_URI`` (a replica set: transactions need one) and the
database from ``$MONGODB_DATABASE``.
"""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "example-only-not-a-secret")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "mysite.apps.MongoAdminConfig",
    "mysite.apps.MongoAuthConfig",
    "mysite.apps.MongoContentTypesConfig",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "dogs_integrations.django",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "mysite.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": {
        "ENGINE": "django_mongodb_backend",
        "HOST": os.environ.get("MONGODB_URI", "mongodb://localhost:27017/?replicaSet=rs0"),
        "NAME": os.environ.get("MONGODB_DATABASE", "mysite"),
    },
}
DEFAULT_AUTO_FIELD = "django_mongodb_backend.fields.ObjectIdAutoField"
# The contrib apps' own migrations use integer keys: their tables are made from the models
# (migrate --run-syncdb). A real project generates MongoDB migrations for them instead
# (django-mongodb-backend's project template has them).
MIGRATION_MODULES = {app: None for app in ("admin", "auth", "contenttypes", "sessions", "shop")}

USE_TZ = True
STATIC_URL = "static/"

# Dogs: the jobs share the "default" database's MongoDB client (and so its transactions).
DOGS = {
    "USING": "default",
    "WORKERS_COUNT": 4,
    "POLL_INTERVAL": "1s",
}

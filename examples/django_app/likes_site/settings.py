"""
Settings of the likes example. No SQL database: posts, likes and comments are PynamoDB models in one DynamoDB table.

Environment variables: ``LIKES_DYNAMODB_TABLE`` (default ``Social``), ``LIKES_DYNAMODB_HOST`` (an endpoint URL;
unset means AWS), ``LIKES_AWS_REGION`` (default ``us-east-1``), ``LIKES_DUPLICATE_LIKE_STATUS`` (``409``, the
default, or ``200``), ``DJANGO_SECRET_KEY``, ``DJANGO_DEBUG``.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "insecure-key-for-the-example-only")
DEBUG = os.environ.get("DJANGO_DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = ["likes.apps.LikesConfig"]
MIDDLEWARE: List[str] = []
ROOT_URLCONF = "likes_site.urls"
DATABASES: Dict[str, Any] = {}
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
USE_TZ = True

LIKES = {
    "TABLE": os.environ.get("LIKES_DYNAMODB_TABLE", "Social"),
    "HOST": os.environ.get("LIKES_DYNAMODB_HOST") or None,
    "REGION": os.environ.get("LIKES_AWS_REGION", "us-east-1"),
    "DUPLICATE_LIKE_STATUS": int(os.environ.get("LIKES_DUPLICATE_LIKE_STATUS", "409")),
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"likes": {"handlers": ["console"], "level": "INFO"}},
}

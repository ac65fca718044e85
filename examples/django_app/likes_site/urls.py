"""The project's URLs: the likes API at the root."""
from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("", include("likes.urls"))]

"""The API's URLs."""
from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("posts/<str:post_id>", views.PostView.as_view(), name="post"),
    path("posts/<str:post_id>/like-count", views.LikeCountView.as_view(), name="like-count"),
    path("posts/<str:post_id>/likes/<str:user_id>", views.LikeView.as_view(), name="like"),
]

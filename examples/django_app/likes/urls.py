"""The API's URLs."""
from __future__ import annotations

from django.urls import path

from . import views

urlpatterns = [
    path("posts/<str:post_id>", views.PostView.as_view(), name="post"),
    path("posts/<str:post_id>/like-count", views.LikeCountView.as_view(), name="like-count"),
    path("posts/<str:post_id>/likes/<str:user_id>", views.LikeView.as_view(), name="like"),
    path("posts/<str:post_id>/comments", views.CommentsView.as_view(), name="comments"),
    path("posts/<str:post_id>/comment-count", views.CommentCountView.as_view(), name="comment-count"),
    path("comments/<str:comment_id>", views.CommentView.as_view(), name="comment"),
    path("comments/<str:comment_id>/restore", views.CommentRestoreView.as_view(), name="comment-restore"),
]

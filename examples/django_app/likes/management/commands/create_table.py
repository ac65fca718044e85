"""``manage.py create_table``: create the table of posts, likes and comments if it does not exist."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from likes.dynamo import get_models


class Command(BaseCommand):
    """Create the table of ``settings.LIKES`` (on-demand billing)."""

    help = "Create the DynamoDB table of posts, likes and comments if it does not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        """Create the table, or say it exists."""
        Post = get_models().post
        if Post.exists():
            self.stdout.write(f"table {Post.Meta.table_name} exists")
            return
        Post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        self.stdout.write(f"created table {Post.Meta.table_name}")

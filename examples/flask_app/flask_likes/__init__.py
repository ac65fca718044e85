"""
A Flask app that counts likes and comments with pynamodb-counters: :func:`create_app` is its application factory.

Configuration (``create_app(config)``, or ``FLASK_``-prefixed environment variables):

``DYNAMODB_TABLE``
    the table holding posts and likes (default ``"Social"``);
``DYNAMODB_HOST``
    the DynamoDB endpoint URL, ``None`` for AWS (default);
``AWS_REGION``
    the region (default ``"us-east-1"``);
``DUPLICATE_LIKE_STATUS``
    ``409`` (default): a duplicate like is a conflict; ``200``: liking and unliking are idempotent.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

import click
from flask import Flask
from pynamodb_counters import signals

from .cache import CountCache
from .errors import register_error_handlers
from .models import build_models
from .views import bp

__all__ = ["DEFAULTS", "create_app"]

DEFAULTS: Mapping[str, Any] = {
    "DYNAMODB_TABLE": "Social",
    "DYNAMODB_HOST": None,
    "AWS_REGION": "us-east-1",
    "DUPLICATE_LIKE_STATUS": 409,
}


def create_app(config: Optional[Mapping[str, Any]] = None) -> Flask:
    """Build the app: defaults, then ``FLASK_*`` environment variables, then ``config``.

    :raises ValueError: ``DUPLICATE_LIKE_STATUS`` is neither 200 nor 409.
    """
    app = Flask(__name__)
    app.config.from_mapping(DEFAULTS)
    app.config.from_prefixed_env()
    app.config.from_mapping(config or {})
    if app.config["DUPLICATE_LIKE_STATUS"] not in (200, 409):
        raise ValueError(f"DUPLICATE_LIKE_STATUS must be 200 or 409, not {app.config['DUPLICATE_LIKE_STATUS']!r}")

    models = build_models(app.config["DYNAMODB_TABLE"], app.config["DYNAMODB_HOST"], app.config["AWS_REGION"])
    app.extensions["likes_models"] = models

    # blinker holds receivers weakly: the caches live in app.extensions, so their bound methods live as long as
    # the app, and an app that is dropped (a test's, say) takes its receivers with it.
    like_cache = CountCache("like")
    app.extensions["like_cache"] = like_cache
    signals.child_added.connect(like_cache.on_change, sender=models.like)
    signals.child_removed.connect(like_cache.on_change, sender=models.like)
    # A comment's edit sends child_added / child_removed when it starts or stops counting (publish, restore, soft
    # delete, and both for a move); child_changed is for sum counters, which comments do not have, but a receiver
    # that drops on every change cannot miss one if they gain one.
    comment_cache = CountCache()
    app.extensions["comment_cache"] = comment_cache
    for signal in (signals.child_added, signals.child_removed, signals.child_changed):
        signal.connect(comment_cache.on_change, sender=models.comment)

    register_error_handlers(app)
    app.register_blueprint(bp)

    @app.cli.command("create-table")
    def create_table() -> None:
        """Create the table of posts, likes and comments (on-demand billing) if it does not exist."""
        if models.post.exists():
            click.echo(f"table {app.config['DYNAMODB_TABLE']} exists")
            return
        models.post.create_table(billing_mode="PAY_PER_REQUEST", wait=True)
        click.echo(f"created table {app.config['DYNAMODB_TABLE']}")

    @app.cli.command("count-stream")
    def count_stream_once() -> None:
        """Give the stream handler every record of the table's stream, as a Lambda function would be given them
        (to try the bookmarks without Lambda): records counted already are skipped, so running it again counts
        only what is new."""
        from pynamodb_counters.testing import StreamReader

        from .stream import stream_handler

        result = stream_handler(models)(StreamReader(models.post).pending())
        click.echo(repr(result))

    return app

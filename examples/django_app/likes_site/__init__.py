"""The Django project of the likes example: settings and URLs; the app is :mod:`likes`."""

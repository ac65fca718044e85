"""The likes app: posts, likes and comments as PynamoDB models counted by pynamodb-counters, a JSON API, and
Django signals."""

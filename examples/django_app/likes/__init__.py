"""The likes app: PynamoDB models counted by pynamodb-counters, a JSON API, and Django signals."""

"""Limits the shared API test server runs with."""

TEAM_LIMIT = 3

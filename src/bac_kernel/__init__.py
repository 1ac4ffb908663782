"""Bac\x27s in-sandbox code interpreter server (built in a later issue)."""

"""Wire models shared by the SDK, the server and the in-sandbox daemons.

This package is a leaf: it imports nothing else of Bac's.
"""

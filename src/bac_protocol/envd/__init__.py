"""Generated envd messages and Connect stubs (scripts/gen-proto); do not edit."""

"""MCP servers as tool providers: configuration, sessions, pinned calls and drift checks."""

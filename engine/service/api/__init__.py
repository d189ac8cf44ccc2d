"""The engine's HTTP API beyond the core routes of engine/service/server.py: the
OpenAI-compatible endpoints, the library and system routes, and the guard that
every request passes."""

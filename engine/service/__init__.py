"""The service: the engine core the server calls, the HTTP API, settings,
the model catalogue and downloads, active profiling, the client.
"""

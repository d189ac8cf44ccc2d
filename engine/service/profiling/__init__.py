"""Active profiling: timing generation and retrieval on this
machine while idle, and when to do it again.
"""

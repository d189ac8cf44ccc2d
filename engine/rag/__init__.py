"""The RAG core: the store, ingestion, answering and the pipeline. It imports
the runtime, never the service.
"""

"""The catalogue of recommended models and rerankers, and their
downloads.
"""

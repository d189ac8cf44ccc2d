"""One module per document format. Each exposes parse functions called as
`parse(path=..., data=...)` (or `parse(path=...)` for formats read as a stream);
`engine.ingest.parsers` holds the one registry that maps suffixes to them."""

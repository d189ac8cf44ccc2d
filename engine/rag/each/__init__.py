"""Ask every document: one question over each file of a collection or folder."""

"""Ask each document: one question of every document of a collection or folder,
answered as a table (the window's dialog, the CLI's `ask --each`)."""

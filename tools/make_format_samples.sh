#!/usr/bin/env bash
# Writes tests/fixtures/made_by_tools/: one short text (greenhouse.md, light.csv)
# written by the tools people make documents with, as tests/engine/rag/ingest/formats/
# test_made_by_tools.py reads them. Needs pandoc and LibreOffice (Debian:
# apt-get install pandoc libreoffice-writer-nogui libreoffice-calc-nogui
# libreoffice-impress-nogui). Run from the repository root; commit what it writes.
set -euo pipefail
out=tests/fixtures/made_by_tools
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HOME="$work/home"  # LibreOffice's profile, not the person's
for fmt in odt docx html epub rtf pptx; do
  pandoc --standalone "$out/greenhouse.md" -o "$out/pandoc.$fmt"
done
pandoc --standalone -t plain "$out/greenhouse.md" -o "$out/pandoc.txt"
lo() { soffice --headless --convert-to "$1" --outdir "$work" "$2" >/dev/null; }
lo odt "$out/pandoc.docx" && mv "$work/pandoc.odt" "$out/libreoffice.odt"
for fmt in docx pdf rtf html epub; do
  lo "$fmt" "$out/pandoc.odt" && mv "$work/pandoc.$fmt" "$out/libreoffice.$fmt"
done
lo pptx "$out/pandoc.pptx" && mv "$work/pandoc.pptx" "$out/libreoffice.pptx"
# UTF-8 comma-separated (LibreOffice's CSV import assumes Latin-1 otherwise).
soffice --headless --infilter="CSV:44,34,76" --convert-to xlsx --outdir "$work" \
  "$out/light.csv" >/dev/null
mv "$work/light.xlsx" "$out/libreoffice.xlsx"
ls -l "$out"

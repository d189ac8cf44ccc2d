"""Writes resources/language_names.json: the English name of each language py3langid
tells apart (ISO 639 code → name), from Debian's iso-codes (`apt-get install iso-codes`).
The prompt names the question's language with it ("Answer in German.")."""

from __future__ import annotations

import json
import re
from pathlib import Path

ISO_CODES = Path("/usr/share/iso-codes/json")
OUT = Path(__file__).resolve().parents[1] / "resources" / "language_names.json"
NOT_A_LANGUAGE = {"zxx"}  # "no linguistic content"


def main() -> None:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    codes = sorted(set(LanguageIdentifier.from_model_file(MODEL_FILE).nb_classes))
    names: dict[str, str] = {}
    for table in ("639-3", "639-2"):
        for entry in json.loads((ISO_CODES / f"iso_{table}.json").read_text())[table]:
            for key in ("alpha_2", "alpha_3"):
                if key in entry:
                    names.setdefault(entry[key], entry["name"])
    chosen = {
        code: re.sub(r"\s*\(.*?\)", "", names[code]).split(";")[0].strip()
        for code in codes
        if code in names and code not in NOT_A_LANGUAGE
    }
    OUT.write_text(json.dumps(chosen, ensure_ascii=False, indent=0, sort_keys=True) + "\n")
    print(f"{len(chosen)} of {len(codes)} languages named in {OUT}")


if __name__ == "__main__":
    main()

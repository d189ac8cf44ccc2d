"""AppStream metainfo: what software centres (GNOME Software, Discover) list.

Installed as metainfo/<reverse_dns>.metainfo.xml beside the .desktop entry it
names (per user: ~/.local/share/metainfo; the .deb: /usr/share/metainfo).
tests/native/test_metainfo.py checks it with `appstreamcli validate` where that is
installed.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from native.identity import IDENTITY, AppIdentity


def metainfo_name(*, identity: AppIdentity = IDENTITY) -> str:
    return f"{identity.reverse_dns}.metainfo.xml"


def metainfo_xml(*, version: str, date: str, identity: AppIdentity = IDENTITY) -> str:
    """The component for `version`, released on `date` (YYYY-MM-DD)."""
    mediatypes = "".join(f"    <mediatype>{escape(m)}</mediatype>\n" for m in identity.mime_types)
    categories = "".join(f"    <category>{escape(c)}</category>\n" for c in identity.categories)
    keywords = "".join(f"    <keyword>{escape(k)}</keyword>\n" for k in identity.keywords)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<component type="desktop-application">\n'
        f"  <id>{identity.reverse_dns}</id>\n"
        "  <metadata_license>CC0-1.0</metadata_license>\n"
        f"  <project_license>{escape(identity.license)}</project_license>\n"
        f"  <name>{escape(identity.name)}</name>\n"
        f"  <summary>{escape(identity.summary)}</summary>\n"
        f'  <developer id="{identity.reverse_dns.rsplit(".", 1)[0]}">\n'
        f"    <name>{escape(identity.developer)}</name>\n"
        "  </developer>\n"
        "  <description>\n"
        "    <p>\n"
        "      RAGDoll reads the documents in folders you choose (PDF, Word, PowerPoint, Excel,\n"
        "      OpenDocument, EPUB, HTML, Markdown, text, CSV, RTF and e-mail) and answers\n"
        "      questions about them, citing the page each answer comes from.\n"
        "    </p>\n"
        "    <p>\n"
        "      Everything stays on your computer: the index, the language model and your\n"
        "      questions. Nothing is sent to a server.\n"
        "    </p>\n"
        "  </description>\n"
        f'  <launchable type="desktop-id">{identity.app_id}.desktop</launchable>\n'
        f'  <url type="homepage">{escape(identity.homepage)}</url>\n'
        '  <content_rating type="oars-1.1"/>\n'
        "  <categories>\n"
        f"{categories}"
        "  </categories>\n"
        "  <keywords>\n"
        f"{keywords}"
        "  </keywords>\n"
        "  <provides>\n"
        f"    <binary>{identity.app_id}</binary>\n"
        f"{mediatypes}"
        "  </provides>\n"
        "  <releases>\n"
        f'    <release version="{escape(version)}" date="{escape(date)}"/>\n'
        "  </releases>\n"
        "</component>\n"
    )

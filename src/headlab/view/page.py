"""The page: one self-contained HTML file (style, script and data inlined; no server, no network).

The script is small hand-written JavaScript drawing on canvas and SVG, not a bundled plotting
library: the page needs heat maps, line charts with a band and coloured tokens, about 300 lines,
while a plotting bundle (plotly.js: 3.5 MB minified) would spend a third of the 10 MB budget
before any data, and would be one more thing to keep offline. The data travels as one JSON block
(`<script type="application/json">`), read by the script at load.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any


def render_page(data: dict[str, Any]) -> str:
    """The HTML of the page showing `data` (`run_page_data` or `sweep_page_data`)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    payload = payload.replace("</", "<\\/")  # a token "</script>" cannot close the data block
    assets = resources.files("headlab.view") / "assets"
    style = (assets / "view.css").read_text(encoding="utf-8")
    script = (assets / "view.js").read_text(encoding="utf-8")
    title = html.escape(f"headlab-view: {data.get('title', '')}")
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            f"script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{title}</title><style>{style}</style></head>\n<body>\n"
            f"<header><h1>{title}</h1><ul id=\"notes\"></ul></header>\n<main id=\"app\"></main>\n"
            f"<script id=\"headlab-data\" type=\"application/json\">{payload}</script>\n"
            f"<script>{script}</script>\n</body></html>\n")

"""The operator's icon (the CSV's and the console QuickStart's): a module of its own, so
that the run-time QuickStart does not load the bundle generator."""

from typing import Final

# A padlock, drawn for this project.
ICON_SVG: Final = """\
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 64 64">\
<rect width="64" height="64" rx="12" fill="#1f4e79"/>\
<path d="M22 28v-6a10 10 0 0 1 20 0v6" fill="none" stroke="#fff" stroke-width="5"/>\
<rect x="16" y="28" width="32" height="24" rx="4" fill="#fff"/>\
<circle cx="32" cy="38" r="4" fill="#1f4e79"/>\
<rect x="30" y="40" width="4" height="7" fill="#1f4e79"/>\
</svg>"""

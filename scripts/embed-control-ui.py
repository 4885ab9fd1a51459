#!/usr/bin/env python3
"""Regenerates the embedded assets of src/gateway/control/control_ui.c from
share/control-ui/ (index.html, app.css, app.js, favicon.svg): the C strings between the
clang-format off/on markers. Run after editing an asset; no build step runs
at make or run time."""
import os, re, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def cstr(name, path):
    out = []
    for line in open(path).read().split("\n"):
        out.append('    "%s\\n"' % line.replace("\\", "\\\\").replace('"', '\\"'))
    return "static const char %s[] =\n%s;\n" % (name, "\n".join(out))

share = os.path.join(root, "share", "control-ui")
body = "\n".join([cstr("S_html", os.path.join(share, "index.html")),
                  cstr("S_css", os.path.join(share, "app.css")),
                  cstr("S_js", os.path.join(share, "app.js")),
                  cstr("S_icon", os.path.join(share, "favicon.svg"))])
src = os.path.join(root, "src", "gateway", "control", "control_ui.c")
text = open(src).read()
new = re.sub(r"(/\* clang-format off \*/\n).*?(/\* clang-format on \*/)",
             lambda m: m.group(1) + body + m.group(2), text, flags=re.S)
open(src, "w").write(new)
sys.exit(0)

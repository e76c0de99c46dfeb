"""What "inert on a terminal" means, checked on a renderer's real output.

A renderer draws on a console from attn_doctor.render.console (the one output seam), once with
colour forced and once without. Without colour there must be no escape sequence and no control
or bidi character at all (tab and newline aside): whatever outside text carried is shown escaped.
With colour, every escape sequence must be a style (SGR), and taking them out must give exactly
the output without colour: the only escapes on the terminal are the styles the doctor emits.
"""

from __future__ import annotations

import io
import re

from hypothesis import strategies as st

from attn_doctor.render.console import InertConsole

SGR = re.compile("\x1b\\[[0-9;]*m")
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

# What hostile strings are made of: control characters (C0, DEL, C1), whole escape sequences
# (OSC title and clipboard, CSI colour and screen clearing, 8-bit CSI), bidi controls, rich markup
# (styles, links, closing tags, escaped brackets) and ordinary text.
CONTROLS = st.sampled_from([chr(c) for c in [*range(0, 32), 127, *range(0x80, 0xA0)]])
SEQUENCES = st.sampled_from([
    "\x1b]0;pwned\x07", "\x1b]52;c;ZXZpbA==\x07", "\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "\x1b[31m", "\x1b[5;99m",
    "\x1b[2J", "\x1b[1A\x1b[K", "\x9b31m", "\x1bP+q\x1b\\", "\x1b(0", "\x1bc",
])
BIDI = st.sampled_from([chr(c) for c in [*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C]])
MARKUP = st.sampled_from(["[reverse]", "[/]", "[red]", "[bold blink]", "[link=http://x]x[/link]", "\\[", "[", "]", "[/red]", ":smile:"])
HOSTILE = st.lists(st.one_of(CONTROLS, SEQUENCES, BIDI, MARKUP, st.text(max_size=6)), min_size=1, max_size=8).map("".join)


def rendered(draw_on, colour: bool) -> str:
    console = InertConsole(file=io.StringIO(), force_terminal=True, color_system="truecolor" if colour else None, width=100,
                           highlight=False)
    draw_on(console)
    return console.file.getvalue()


def assert_inert(draw_on) -> None:
    plain, coloured = rendered(draw_on, False), rendered(draw_on, True)
    assert "\x1b" not in plain and not UNSAFE.search(plain.replace("\n", "").replace("\t", "")), repr(plain[:2000])
    for match in re.finditer("\x1b", coloured):
        assert SGR.match(coloured, match.start()), repr(coloured[max(0, match.start() - 40):match.start() + 40])
    assert SGR.sub("", coloured) == plain

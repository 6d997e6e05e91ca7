"""A CJK font for the pictures, so that Chinese labels and TEACHING lines are drawn, not empty boxes.

Matplotlib draws each character with the first font of the ``font.family`` list that has it.
``add_cjk_fallback`` (run when ``nanovllm_teach.viz`` is imported) appends the first CJK font this machine
has to that list, after the families already there, so Latin text looks as before and Chinese falls back
to it. Without one, a course in Chinese is told in one line how to get one (``CJK_FONT_HINT``).

No torch. Emits no events.
"""

from __future__ import annotations

import warnings

from matplotlib import font_manager, rcParams

from nanovllm_teach.i18n import Text, resolve_lang, say

# Common CJK fonts, Linux's first (Debian's fonts-noto-cjk, WenQuanYi), then macOS's and Windows'.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Source Han Sans SC", "WenQuanYi Zen Hei",
             "WenQuanYi Micro Hei", "PingFang SC", "Heiti SC", "Microsoft YaHei", "SimHei")
CJK_FONT_HINT = Text(en="no CJK font found, so Chinese text is drawn as empty boxes: install one (Debian/Ubuntu: "
                        "apt install fonts-noto-cjk; Fedora: dnf install google-noto-sans-cjk-fonts; macOS and "
                        "Windows have one)",
                     zh="没有找到 CJK 字体，图中的中文会画成空白方框：请安装一个（Debian/Ubuntu："
                        "apt install fonts-noto-cjk；Fedora：dnf install google-noto-sans-cjk-fonts；"
                        "macOS 和 Windows 自带）")


# Where those fonts' files are called so: matplotlib's font list is cached, and a font installed after the
# cache was built is found only by looking at the files.
_CJK_FILES = ("notosanscjk", "sourcehansans", "wqy", "pingfang", "msyh", "simhei")


def cjk_font() -> str | None:
    """The name of the first CJK font in ``CJK_FONTS`` that this machine has, or None."""
    name = _known_cjk_font()
    if name is None:
        for path in font_manager.findSystemFonts():
            if any(part in path.lower().replace("-", "").replace("_", "") for part in _CJK_FILES):
                font_manager.fontManager.addfont(path)
        name = _known_cjk_font()
    return name


def _known_cjk_font() -> str | None:
    installed = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONTS if name in installed), None)


def add_cjk_fallback() -> str | None:
    """Append this machine's CJK font to ``font.family`` (once); returns its name, or None, after warning
    in one line if the course is in Chinese."""
    name = cjk_font()
    if name is None:
        if resolve_lang() == "zh":
            warnings.warn(say(CJK_FONT_HINT), RuntimeWarning, stacklevel=2)
    elif name not in rcParams["font.family"]:
        rcParams["font.family"] = [*rcParams["font.family"], name]
    return name

"""``python main.py --tab TAB``: every page and tab of the window can be opened first, and --tab (as
``python main.py --help`` lists it) names them all."""

from __future__ import annotations

from pathlib import Path

from core.cli.window_args import TABS


def test_tab_option_opens_every_page_and_tab_and_names_them_all(qtbot, tmp_path: Path) -> None:
    from gui.window.app import show_tab
    from gui.window.main_window import MainWindow

    window = MainWindow(None, runs_root=tmp_path / "runs")
    qtbot.addWidget(window)
    pages = {window.pages.tabText(i).lower() for i in range(window.pages.count())} - {"run"}
    tabs = {window.tabs.tabText(i).lower() for i in range(window.tabs.count())}
    assert pages | tabs == set(TABS), "a page or tab --tab cannot open, or a --tab name with no page"
    for tab in TABS:
        show_tab(window, tab)
        page = window.pages.tabText(window.pages.currentIndex()).lower()
        shown = page if page != "run" else window.tabs.tabText(window.tabs.currentIndex()).lower()
        assert shown == tab, (tab, page, shown)

"""The lab's library folder: documents about the corpus's Kestrel bridge, and a few hostile files.

What an air-gapped site keeps on a share: an inspection report as a multi-page PDF, a
committee's minutes as DOCX, an engineer's notes in Markdown, and the files that go wrong
(a scanned PDF with no text layer, a password-protected PDF, a zip-bomb DOCX). Every file
is written by the real library for its format (lab/documents.py), so briefd reads
them exactly as it would read a user's.

The facts agree with the corpus (lab/corpus.py, topic "kestrel"), in other words,
so a brief can be answered from the web, from the library, or from both. Each finding
sits on a known page, so a test can check that a citation names the right one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from lab.documents import (
    write_docx,
    write_encrypted_pdf,
    write_image_pdf,
    write_pdf,
    write_text,
    write_zip_bomb_docx,
)

INSPECTION_TITLE = "Kestrel River Bridge: Principal Inspection Report 2025"
INSPECTION_PAGES = [
    # page 1
    "Kestrel River Bridge: Principal Inspection Report 2025\n\n"
    "Prepared by Brantley & Osei for the County Highways Department.\n\n"
    "This report records the principal inspection of the Kestrel River bridge carried out in "
    "February 2025. The inspection covered the deck, the towers and all 32 cable anchorages.",
    # page 2: the finding
    "Findings\n\n"
    "The inspectors found corrosion in 7 of the 32 cable anchorages of the Kestrel River bridge. "
    "The worst anchorage had lost 38 percent of its steel section. "
    "Water and de-icing salt had reached the anchorages past cracked grout caps and failed seals.",
    # page 3: the recommendation
    "Recommendation\n\n"
    "Because 7 anchorages can no longer be relied on, the inspectors recommended that the Kestrel "
    "River bridge be closed to all traffic in March 2025 until the corroded anchorages are replaced.",
]
FINDING_PAGE = 2  # where "7 of the 32 cable anchorages" is
RECOMMENDATION_PAGE = 3

MINUTES_TITLE = "County Highways Committee: minutes of 11 March 2025"
MINUTES_BLOCKS: list[tuple[str, object]] = [
    ("heading", "Item 4: Kestrel River bridge"),
    ("paragraph", "The committee closed the Kestrel River bridge on 11 March 2025, acting on the principal "
                  "inspection report by Brantley & Osei."),
    ("paragraph", "Repairs to the Kestrel bridge anchorages are estimated at 18.6 million dollars."),
    ("table", [["Measure", "Figure"], ["Vehicles a day on the bridge", "31,000"], ["Detour", "14 km"]]),
]
MINUTES_SENTENCE = "The committee closed the Kestrel River bridge on 11 March 2025"

NOTES_TEXT = """# Kestrel bridge site notes

The grout caps over the Kestrel River bridge anchorages were cracked in at least 9 places in 2025.

Salt spray from the winter gritting of the Kestrel bridge deck collects around the anchorage seals.
"""


@dataclass(frozen=True)
class LabLibrary:
    """The folder and what is in it: the readable documents and the hostile files, by name."""

    folder: Path
    inspection: Path
    minutes: Path
    notes: Path
    scanned: Path
    encrypted: Path
    bomb: Path

    @property
    def readable(self) -> tuple[Path, ...]:
        return (self.inspection, self.minutes, self.notes)

    @property
    def hostile(self) -> tuple[Path, ...]:
        return (self.scanned, self.encrypted, self.bomb)


def build_library(folder: Path, *, hostile: bool = True) -> LabLibrary:
    """Write the lab library into `folder` (made if missing); `hostile` adds the files that go wrong."""
    folder.mkdir(parents=True, exist_ok=True)
    reports = folder / "reports"
    reports.mkdir(exist_ok=True)
    inspection = write_pdf(reports / "kestrel-principal-inspection-2025.pdf", INSPECTION_PAGES,
                           title=INSPECTION_TITLE)
    minutes = write_docx(folder / "highways-committee-2025-03-11.docx", MINUTES_TITLE, MINUTES_BLOCKS)
    notes = write_text(folder / "kestrel-site-notes.md", NOTES_TEXT)
    scanned = folder / "scanned-survey.pdf"
    encrypted = folder / "confidential-costs.pdf"
    bomb = folder / "inflated-minutes.docx"
    if hostile:
        write_image_pdf(scanned)
        write_encrypted_pdf(encrypted, "Kestrel River bridge repair costs, restricted.")
        write_zip_bomb_docx(bomb, size=512 << 20)
    return LabLibrary(folder, inspection, minutes, notes, scanned, encrypted, bomb)


def folder_chain(top: Path, levels: int, bottom: tuple[str, bytes] | None = None) -> list[str]:
    """`top`/d/d/.../d, `levels` folders below `top` (made with its parents), a file `bottom` (its name and
    bytes) in the deepest; returns each folder's path, `top` first. Built one level at a time through
    descriptors: os.makedirs recurses, and stops near 1,000 levels, about where os.walk does."""
    top.mkdir(parents=True)
    paths, fd = [str(top)], os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
            paths.append(paths[-1] + "/d")
        if bottom is not None:
            name, data = bottom
            written = os.open(name, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(written, data)
            os.close(written)
    finally:
        os.close(fd)
    return paths

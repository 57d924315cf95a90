"""Corpus Import, the first of the three corpus pages (then Annotate and Review, Agreement and Export): import
documents (upload or paste, map columns, chunk, de-duplicate, preview row by row) into a new or existing corpus.
Nothing is written before "Import N documents". Above the import, "Manage corpora" (``ui.corpus_manager``) lists,
renames and deletes corpora."""

from __future__ import annotations

from pathlib import PurePath

import streamlit as st

from mrag_core.wording import counted
from services import storage
from services.ingest import ColumnMapping, ImportPreview, IngestError, sniff_columns, suggest_mapping
from services.workflows import corpus as cw
from services.workflows.import_stream import ImportReport, StreamedImport
from services.workflows.server_folders import FolderRefused, resolve_inside
from ui.corpus_manager import manage_corpora
from ui.corpus_widgets import show_preview
from ui.navigation import page_setup
from ui.render import md_plain
from ui.server_scope import server_folder_access
from ui.state import corpus_label, default_mark, follow_default, keep_choice, open_store_page

page_setup(__file__, "📥")
st.title("Corpus Import")
st.caption("Upload or paste documents, check the preview, then import them into a new or existing corpus.")

store = open_store_page()

with st.expander("Manage corpora: what each holds; rename, describe or delete", key="cm_open", on_change="rerun"):
    if st.session_state.get("cm_open"):  # drawn (and counted) only while open
        manage_corpora(store)

UPLOAD_TYPES = {
    "table": ["csv", "tsv", "json", "jsonl", "ndjson", "parquet", "bz2", "gz"],
    "zip": ["zip"],
    "wikipedia": ["json", "jsonl", "bz2", "gz"],
    "topics": ["zip"],
    "text": ["txt", "md"],
}
TOPIC_FROM = ["Upload a ZIP", "A folder on the machine running the app"]
NONE = "(none)"


@st.cache_data(max_entries=4, show_spinner="Reading the upload...")
def _read(kind: str, files: tuple[tuple[str, bytes], ...],
          mappings: tuple[tuple[str, str | None, str | None] | None, ...] | None, table_format: str | None,
          label_from_folder: bool) -> ImportPreview:
    """The upload read with one column mapping per file (tables; None for a table that cannot be read, which the
    preview lists as left out)."""
    cm = [ColumnMapping(*m) if m is not None else None for m in mappings] if mappings is not None else None
    return cw.read_upload(kind, list(files), mapping=cm, table_format=table_format,
                          label_from_folder=label_from_folder)


@st.cache_data(max_entries=2, show_spinner="Reading the folder...")
def _read_folder(path: str, signature: str) -> ImportPreview:
    """The topic layout at ``path``; ``signature`` (file sizes and times) re-reads it when it changes."""
    return cw.read_topic_folder(path)


def _follow_source_name(default: str) -> None:
    """Name the new corpus after the source (``default``) until the user types a name of their own: an untouched
    name follows the next upload, a typed one stays. Call before drawing the name field (drawn without ``value=``).
    """
    key, mark = "imp_new_name", default_mark("imp_new_name")
    untouched = key not in st.session_state or st.session_state[key] == st.session_state.get(mark)
    if untouched and st.session_state.get(key) != default:
        st.session_state[key] = default
    st.session_state[mark] = default


def _taken_name(name: str) -> str | None:
    """The name of the stored corpus that a new corpus called ``name`` would clash with (the store strips names
    and compares them exactly), or None."""
    try:
        return cw.get_corpus_by_name(store, name).name if name.strip() else None
    except storage.NotFoundError:
        return None


Mapping = tuple[str, str | None, str | None]


def _table_columns(name: str, data: bytes, table_format: str | None) -> tuple[list[str] | None, str | None]:
    """The columns of the table ``name``: ``(columns, None)``, or ``(None, why)`` when it cannot be read."""
    fmt = table_format or cw.guess_format(name)
    if fmt is None:
        return None, (f"Cannot tell the table format of {md_plain(repr(name))} from its name; rename it to .csv, "
                      ".json, .jsonl or .parquet.")
    try:
        return sniff_columns(data, fmt, name), None
    except IngestError as exc:
        return None, f"This file cannot be read: {md_plain(str(exc))}"


def _mapping_boxes(name: str, columns: list[str], suffix: str, heading: str) -> Mapping:
    """Draw the column mapping boxes of one table (keys ``imp_map_text{suffix}``...) and return the mapping they
    show. Each new file (or new columns) gets its own guessed mapping, set as the boxes' values (so the boxes show
    the mapping the preview uses); the user's changes hold until another file is uploaded."""
    guess = suggest_mapping(columns)
    options = [NONE, *columns]
    owner = (name, tuple(columns))  # a new file (or new columns): its own guess; pasted text keeps its mapping
    follow_default(f"imp_map_text{suffix}", owner, guess.text if guess else columns[0])
    follow_default(f"imp_map_title{suffix}", owner, guess.title if guess and guess.title else NONE)
    follow_default(f"imp_map_label{suffix}", owner, guess.label if guess and guess.label else NONE)
    st.markdown(heading)
    c1, c2, c3 = st.columns(3)
    text_col = c1.selectbox("Text column", columns, key=f"imp_map_text{suffix}")
    title_col = c2.selectbox("Title column (optional)", options, key=f"imp_map_title{suffix}")
    label_col = c3.selectbox("Label column (optional)", options, key=f"imp_map_label{suffix}")
    return text_col, None if title_col == NONE else title_col, None if label_col == NONE else label_col


def _column_mappings(files: list[tuple[str, bytes]], table_format: str | None
                     ) -> tuple[tuple[Mapping | None, ...] | None, list[str]]:
    """Draw the column mapping of the uploaded tables that can be read: one mapping when they all have the same
    columns, else one per file (each guessed from its own columns, as ``mrag-studio import`` does), so each
    can be corrected. Returns one mapping per file (None for a table that cannot be read: the preview lists it as
    left out, with why, and the others are read and imported, as the CLI does) and why each unreadable table cannot
    be read; the mappings are None when no table can be read."""
    columns: list[list[str] | None] = []
    unreadable: list[str] = []
    for name, data in files:
        cols, why = _table_columns(name, data, table_format)
        columns.append(cols)
        if why is not None:
            unreadable.append(why)
    readable = [(name, cols) for (name, _), cols in zip(files, columns) if cols is not None]
    if not readable:
        return None, unreadable
    for why in unreadable:
        st.warning(f"{why.rstrip('.')}. It is left out: the other files are previewed and imported without it "
                   "(fix it and upload it again to import it too).")
    if all(cols == readable[0][1] for _, cols in readable):
        shared = _mapping_boxes(readable[0][0], readable[0][1], "", "**Column mapping**")
        return tuple(shared if cols is not None else None for cols in columns), unreadable
    st.caption("These files have different columns: each has its own mapping, guessed from its columns.")
    drawn = iter([_mapping_boxes(name, cols, f"_{i}" if i else "", f"**Column mapping of '{md_plain(name)}'**")
                  for i, (name, cols) in enumerate(readable)])
    return tuple(next(drawn) if cols is not None else None for cols in columns), unreadable


def _stream(kind: str, files: list[tuple[str, bytes]], topic_folder: str, mappings: tuple[Mapping | None, ...] | None,
            table_format: str | None, label_from_folder: bool, chunking: cw.ChunkOptions | None, deduplicate: bool,
            existing: storage.CorpusInfo | None) -> StreamedImport:
    """The upload with the import options, to be read as a stream (its preview, then its import): tables row by row
    (never a list of every row), the other kinds from their cached previews. Raises ValueError (bad chunking)."""
    if chunking is not None:
        chunking.validate()
    hashes = cw.corpus_text_hashes(store, existing.id) if existing is not None and deduplicate else set()
    labels = [c.name for c in cw.list_categories(store, existing.id)] if existing is not None else []
    options = {"chunking": chunking, "deduplicate": deduplicate, "existing_hashes": hashes, "existing_labels": labels}
    if kind == "table" and not topic_folder and mappings is not None:
        cm = [ColumnMapping(*m) if m is not None else None for m in mappings]
        return StreamedImport(tables=cw.table_files(files, cm, table_format=table_format), **options)
    if topic_folder:
        read = _read_folder(topic_folder, cw.source_signature(topic_folder))
    else:
        read = _read(kind, tuple(files), mappings, table_format, label_from_folder)
    return StreamedImport(preview=read, **options)


@st.cache_data(max_entries=4, show_spinner="Reading the upload...")
def _report(kind: str, files: tuple[tuple[str, bytes], ...], topic_folder: str, signature: str,
            mappings: tuple[Mapping | None, ...] | None, table_format: str | None, label_from_folder: bool,
            chunking: cw.ChunkOptions | None, deduplicate: bool, target: tuple[int, int, int] | None) -> ImportReport:
    """The preview of the upload with these options: every count, the first records and issues (small, whatever the
    upload's size). ``signature`` (a folder's file sizes and times) and ``target`` (the corpus' id and versions)
    read it again when they change."""
    existing = cw.get_corpus(store, target[0]) if target is not None else None
    return _stream(kind, list(files), topic_folder, mappings, table_format, label_from_folder, chunking, deduplicate,
                   existing).report()


def _preview_and_import(kind: str, files: list[tuple[str, bytes]], topic_folder: str,
                        mappings: tuple[Mapping | None, ...] | None, table_format: str | None,
                        label_from_folder: bool, chunking: cw.ChunkOptions | None, deduplicate: bool,
                        existing: storage.CorpusInfo | None, new_name: str, name_taken: bool) -> None:
    """Section 3: the preview of what would be imported with these options, and the import button (disabled
    while the new corpus' name is ``name_taken``). The import reads the upload again as a stream and writes it in
    chunks nobody sees until the last one publishes them (a closed tab or a stopped page leaves nothing half-way)."""
    target = (existing.id, existing.version, existing.labels_version) if existing is not None else None
    signature = cw.source_signature(topic_folder) if topic_folder else ""
    try:
        preview = _report(kind, tuple(files), topic_folder, signature, mappings, table_format, label_from_folder,
                          chunking, deduplicate, target)
    except ValueError as exc:
        st.error(f"No preview: {md_plain(str(exc))}")
        return
    show_preview(preview)

    n = preview.n_records
    if not st.button(f"Import {counted(n, 'document')}", type="primary", disabled=n == 0 or name_taken,
                     key="imp_go"):
        return
    bar = st.progress(0.0, text=f"Importing {counted(n, 'document')}...")
    try:
        stream = _stream(kind, files, topic_folder, mappings, table_format, label_from_folder, chunking, deduplicate,
                         existing)
        result = cw.import_records(
            store, stream.records(), corpus_id=existing.id if existing is not None else None,
            new_name=new_name if existing is None else None, deduplicate=deduplicate,
            progress=lambda done: bar.progress(min(done / max(n, 1), 1.0), text=f"Written {done} of {n}..."),
        )  # fmt: skip
    except (ValueError, storage.StoreError) as exc:
        bar.empty()
        st.error(f"Nothing was imported: {md_plain(str(exc))}")
        return
    bar.empty()
    st.session_state["corpus_id"] = result.corpus_id
    duplicates = preview.n_duplicates + result.skipped_duplicates  # left out by the preview, then by the store
    st.success(
        f"Imported {counted(result.added, 'document')} into '{md_plain(result.corpus_name)}'"
        + (f" ({counted(duplicates, 'duplicate')} skipped)" if duplicates else "")
        + ". Next: pre-annotate and review them on the Annotate and Review page."
    )


# --------------------------------------------------------------------------- 1. source
st.subheader("1. Source")
kind = st.radio("What are you importing?", list(cw.SOURCE_KINDS), format_func=cw.SOURCE_KINDS.__getitem__,
                key="imp_kind")
topic_folder = ""
by_path = False  # the topic layout from a folder on the server
if kind == "topics" and st.radio("Where is the layout?", TOPIC_FROM, key="imp_topic_from",
                                 horizontal=True) == TOPIC_FROM[1]:
    by_path = True
    access = server_folder_access()  # MRAG_IMPORT_ROOT, else the home folder when served on this machine only
    if access.allowed:
        typed = st.text_input(
            "Path of the folder (or of a .zip / .tar.bz2 archive of it)", key="imp_topic_path",
            placeholder=str(access.root), help="Every <category>/<category>_<topic>.json file under it is read; "
            "the category folder becomes the label and each document's source names its topic. Symbolic links "
            "in it are skipped.",
        ).strip()  # fmt: skip
        st.caption(f"This app reads {md_plain(access.why)}.")
        try:
            topic_folder = str(resolve_inside(access, typed)) if typed else ""
        except FolderRefused as exc:
            st.error(md_plain(str(exc)))
    else:
        st.warning(md_plain(access.why[:1].upper() + access.why[1:] + ". Upload a ZIP instead."))
    uploads = []
else:
    uploads = st.file_uploader("Upload", type=UPLOAD_TYPES[kind], accept_multiple_files=kind in ("text", "table"),
                               key=f"imp_upload_{kind}")
uploads = [u for u in (uploads if isinstance(uploads, list) else [uploads]) if u is not None]
files: list[tuple[str, bytes]] = [(u.name, u.getvalue()) for u in uploads]
table_format: str | None = None
if kind == "table" and not files:
    pasted = st.text_area("...or paste CSV / JSON Lines text", key="imp_paste", height=150,
                          placeholder="title,text,label\nFirst,Some text...,physics")
    paste_fmt = st.selectbox("Format of the pasted text", ["csv", "jsonl", "json"], key="imp_paste_fmt")
    if pasted.strip():
        files = [(f"pasted.{paste_fmt}", pasted.encode("utf-8"))]
        table_format = paste_fmt

# No st.stop() before the last widget: a stopped run keeps the state of the widgets it did not draw, which the
# browser then draws again with their defaults (a "No chunking" radio while chunks of 800 were made). Sections
# that cannot be drawn are skipped instead, so Streamlit forgets their widgets and shows what it uses.
has_source = bool(files or topic_folder)
if not has_source:
    if not by_path:
        st.info("Upload a file (or paste a table) to see a preview.")
    elif access.allowed and not typed:
        st.info("Give a folder path to see a preview.")

mappings: tuple[Mapping | None, ...] | None = None
unreadable = False  # no table of the upload can be read: no preview
label_from_folder = True
if kind == "table" and files:
    mappings, whys = _column_mappings(files, table_format)
    if mappings is None:
        unreadable = True
        for why in whys:
            st.error(why)
elif kind == "zip":
    label_from_folder = st.checkbox("Use the folder name as the label", value=True, key="imp_folder_label")

# --------------------------------------------------------------------------- 2. options
st.subheader("2. Options")
o1, o2 = st.columns(2)
chunk_mode = o1.radio("Chunking", ["No chunking", "Fixed size (characters, with overlap)",
                                   "Paragraphs (merged to at least N characters)"], key="imp_chunk")
chunking: cw.ChunkOptions | None = None
if chunk_mode.startswith("Fixed"):
    size = o1.number_input("Chunk size (characters)", 100, 100_000, 1500, step=100, key="imp_chunk_size")
    overlap = o1.number_input("Overlap (characters)", 0, 50_000, 150, step=50, key="imp_chunk_overlap")
    chunking = cw.ChunkOptions(method="chars", size=int(size), overlap=int(overlap))
elif chunk_mode.startswith("Paragraphs"):
    min_chars = o1.number_input("Minimum chunk size (characters)", 100, 50_000, 800, step=100, key="imp_chunk_min")
    max_chars = o1.number_input("Maximum chunk size (characters)", 200, 100_000, 4000, step=100, key="imp_chunk_max")
    chunking = cw.ChunkOptions(method="paragraphs", min_chars=int(min_chars), max_chars=int(max_chars))
deduplicate = o2.checkbox("Skip duplicate texts (within the upload and already in the corpus)", value=True,
                          key="imp_dedupe")
target = o2.radio("Import into", ["A new corpus", "An existing corpus"], key="imp_target", horizontal=True)
existing: storage.CorpusInfo | None = None
new_name = ""
name_taken = False
target_ready = True
if target == "A new corpus":
    source_name = files[0][0] if files else topic_folder.rstrip("/\\")
    _follow_source_name(PurePath(source_name).name.split(".")[0] or "New corpus")
    new_name = o2.text_input("Name of the new corpus", key="imp_new_name", max_chars=200)
    taken = _taken_name(new_name)  # said at once, not only when Import is clicked
    if taken is not None:
        name_taken = True
        o2.error(f"A corpus called '{md_plain(taken)}' exists: choose it as the target ('An existing corpus') to "
                 "add to it, or pick another name.")
else:
    corpora = cw.list_corpora(store)
    if corpora:
        # kept by id: the shown "(N docs)" changes with each import, and Streamlit would fall back to the first
        existing = keep_choice("Corpus", corpora, key="imp_existing", ident=lambda c: c.id, container=o2,
                               format_func=corpus_label)
    else:
        o2.warning("There is no corpus yet; choose 'A new corpus'.")
        target_ready = False

# --------------------------------------------------------------------------- 3. preview
if has_source and not unreadable:
    st.subheader("3. Preview")
    if target_ready:
        _preview_and_import(kind, files, topic_folder, mappings, table_format, label_from_folder, chunking,
                            deduplicate, existing, new_name, name_taken)

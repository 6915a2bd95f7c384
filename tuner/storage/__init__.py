"""Where studies live: storage URLs, creating and opening a stored study, loading a study
file into its spec and space, riding out a database outage, and worker registration."""

from tuner.storage.database import default_url, mask, open_storage, resolve_url
from tuner.storage.load import load_study_file, spec_from_json
from tuner.storage.studies import OpenStudy, StudyRow, create_study, list_studies, open_study

__all__ = [
    "OpenStudy", "StudyRow", "create_study", "default_url", "list_studies",
    "load_study_file", "mask", "open_storage", "open_study", "resolve_url",
    "spec_from_json",
]

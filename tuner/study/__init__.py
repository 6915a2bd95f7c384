"""Studies: the study file schema, loading, storage URLs, the stored study."""

from tuner.study.load import load_study_file, spec_from_json
from tuner.study.spec import StudySpec
from tuner.study.storage import default_url, mask, open_storage, resolve_url
from tuner.study.store import OpenStudy, StudyRow, create_study, list_studies, open_study

__all__ = [
    "OpenStudy", "StudyRow", "StudySpec", "create_study", "default_url", "list_studies",
    "load_study_file", "mask", "open_storage", "open_study", "resolve_url",
    "spec_from_json",
]

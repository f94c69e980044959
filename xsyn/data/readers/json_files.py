"""JSON formats: `squad_json` (SQuAD v1.1 / 2.0: SQuAD, MLQA, XQuAD) and `race_json` (RACE's folder of
article files)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from xsyn.data.readers.base import DataFormatError, Reader, ReadRequest, Row, preview, read_text
from xsyn.utils import json_fields

# -- SQuAD JSON -----------------------------------------------------------------------------------




class SquadJsonReader(Reader):
    """SQuAD v1.1 JSON: `data[].paragraphs[].{context, qas[].{id, question, answers[]}}`; SQuAD 2.0 adds
    `is_impossible` to a question (read as its `impossible` role)."""

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for path in request.files:
            try:
                data = json.loads(read_text(path, request.notes))["data"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise DataFormatError(f"{path}: not SQuAD JSON ({err}); expected {{'data': [articles]}}") from err
            if not isinstance(data, list):
                raise DataFormatError(f"{path}: not SQuAD JSON ('data' is a {type(data).__name__}); expected "
                                      "{'data': [articles]}")
            for a, article in enumerate(data):
                for p, paragraph in enumerate(self._items(article, "paragraphs", f"{path}: data[{a}]", request)):
                    for q, qa in enumerate(self._items(paragraph, "qas", f"{path}: data[{a}].paragraphs[{p}]",
                                                       request)):
                        where = f"{path}: data[{a}].paragraphs[{p}].qas[{q}]"
                        if not isinstance(qa, dict):
                            request.bad(where, f"expected a question object, got {preview(qa)}")
                            continue
                        try:
                            values = self._question(qa, paragraph)
                        except ValueError as err:
                            request.bad(where, str(err))
                            continue
                        yield Row(where, values)

    @staticmethod
    def _question(qa: Mapping[str, Any], paragraph: Mapping[str, Any]) -> dict[str, Any]:
        """One question's values, each field of the JSON type SQuAD gives it (ids may be numbers)."""
        answers = []
        for i, answer in enumerate(json_fields.field(qa, "answers", list, [])):
            try:
                answers.append((json_fields.field(answer, "text", str),
                                json_fields.field(answer, "answer_start", int)))
            except ValueError as err:
                raise ValueError(f"answers[{i}]: {err}") from None
        uid = qa.get("id")
        if isinstance(uid, bool) or not isinstance(uid, (str, int)):
            raise ValueError(f"id: expected a string, got {json_fields.shown(uid)}" if "id" in qa else "no 'id' field")
        values = {"id": str(uid), "question": json_fields.field(qa, "question", str),
                  "context": json_fields.field(paragraph, "context", str), "answers": answers}
        if "is_impossible" in qa:  # SQuAD 2.0
            values["impossible"] = json_fields.field(qa, "is_impossible", bool)
        return values

    @staticmethod
    def _items(parent: Any, key: str, where: str, request: ReadRequest) -> list[Any]:
        """An article's paragraphs or a paragraph's questions; without that list the article or
        paragraph is one bad row (its questions cannot be read)."""
        items = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(items, list):
            request.bad(where, f"expected an object with a {key!r} list, got {preview(parent)}")
            return []
        return items


# -- RACE ------------------------------------------------------------------------------------------


class RaceJsonReader(Reader):
    """RACE (Lai et al. 2017): each path is a split's folder; under it every `middle/*.txt` and `high/*.txt`
    is one JSON article `{"article", "questions": [...], "options": [[4 options], ...], "answers": ["A", ...],
    "id"}`. A row per question, its id `SUBSET/FILE#QUESTION` (so RACE-M and RACE-H can be scored apart)."""

    reads_folders = True

    def read(self, request: ReadRequest) -> Iterator[Row]:
        for folder in request.files:
            files = sorted(p for p in Path(folder).rglob("*.txt") if p.is_file())
            if not files:
                raise DataFormatError(f"{folder}: no RACE .txt files under this folder (expected middle/*.txt and "
                                      "high/*.txt)")
            for path in files:
                yield from self._questions(path, Path(folder), request)

    @staticmethod
    def _questions(path: Path, folder: Path, request: ReadRequest) -> Iterator[Row]:
        try:
            article = json.loads(read_text(path, request.notes))
        except json.JSONDecodeError as err:
            request.bad(str(path), f"not RACE JSON ({err})")
            return
        try:
            fields = {key: json_fields.field(article, key, kind) for key, kind in
                      (("article", str), ("questions", list), ("options", list), ("answers", list))}
        except ValueError as err:
            request.bad(str(path), f"{err} (a RACE file holds article, questions, options and answers)")
            return
        name = path.relative_to(folder).as_posix()
        for q, question in enumerate(fields["questions"]):
            where = f"{path}: questions[{q}]"
            options = fields["options"][q] if q < len(fields["options"]) else None
            answer = fields["answers"][q] if q < len(fields["answers"]) else None
            if not isinstance(options, list) or not options:
                request.bad(where, f"no options[{q}] (each question needs its list of options)")
                continue
            if not isinstance(answer, str):
                request.bad(where, f"no answers[{q}]" if answer is None else
                            f"answers[{q}]: expected a string (A, B, ...), got {json_fields.shown(answer)}")
                continue
            yield Row(where, {"id": f"{name}#{q}", "article": fields["article"], "question": question,
                              "options": options, "label": answer})

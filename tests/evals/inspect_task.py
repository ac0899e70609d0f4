"""An inspect-ai task of the project's own (make check-evals): the questions of
data/gen.jsonl as chats, one generation each, scored by whether the answer
includes the target. Local data only."""
import os

from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def detinfer_qa():
    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gen.jsonl")
    return Task(dataset=json_dataset(data, FieldSpec(input="question", target="answer", id=None)),
                solver=generate(), scorer=includes())

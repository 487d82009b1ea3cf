"""Reading trtllm-eval and trtllm-bench commands."""

from __future__ import annotations

import pytest

from scriptbuilder.inputs.command_args import (
    BenchArgs,
    CommandArgError,
    EvalArgs,
    FlagValue,
    flag_value,
    is_hf_model_id,
    model_name_from,
    parse_bench_cmd,
    parse_eval_cmd,
    replace_flag_value,
)
from scriptbuilder.inputs.shellwords import Token, tokenize
from scriptbuilder.script.render import quote_literal
from tests.build_env import BuildEnv


def _words(command: str) -> list[Token]:
    return [t for t in tokenize(command) if t.kind == "word"]


# ---------------------------------------------------------------- flag_value


@pytest.mark.parametrize(
    ("command", "names", "value", "span_text"),
    [
        ("x --tp 2", ("--tp",), "2", "2"),
        ("x --tp=2", ("--tp",), "2", "2"),
        ("x --tp 2 --tp=4", ("--tp",), "4", "4"),
        ("x --tp=4 --tp 8", ("--tp",), "8", "8"),
        ("x --model 'a b'", ("--model",), "a b", "'a b'"),
        ("x --model='a b'", ("--model",), "a b", "'a b'"),
        ('x --model="/p/$M"', ("--model",), "/p/$M", '"/p/$M"'),
        ("x -m llama", ("--model", "-m"), "llama", "llama"),
        ("x -mllama", ("--model", "-m"), "llama", "llama"),
        ("x --model= y", ("--model",), "", ""),
        ("x --tp_size 2 --tp 3", ("--tp_size", "--tp"), "3", "3"),
        ("x --tp-size 2", ("--tp",), None, None),
        ("x --tpx=2", ("--tp",), None, None),
        ("x -- --tp 2", ("--tp",), None, None),
        ("x", ("--tp",), None, None),
    ],
)
def test_flag_value(
    command: str, names: tuple[str, ...], value: str | None, span_text: str | None
) -> None:
    found = flag_value(_words(command), names, command=command)
    if value is None:
        assert found is None
        return
    assert found is not None
    assert found.value == value
    assert command[found.start : found.end] == span_text
    assert found.prefix == ""


def test_flag_value_consumes_its_value() -> None:
    # Like click: the second "--tp" is the value of the first, not a flag of its own.
    found = flag_value(_words("x --tp --tp --tp 3"), ("--tp",))
    assert found is not None and found.value == "3"


def test_flag_value_literal() -> None:
    found = flag_value(_words("x --tp $TP"), ("--tp",))
    assert found is not None and found.literal is False


def test_flag_value_missing_value() -> None:
    with pytest.raises(CommandArgError, match="eval_cmd: --tp is missing its value"):
        flag_value(_words("x --tp"), ("--tp",), context="eval_cmd")


def test_quoted_flag_name_spans_whole_word() -> None:
    command = "x '--model=a b' y"
    found = flag_value(_words(command), ("--model",), command=command)
    assert found == FlagValue("a b", 2, 15, True, "--model", prefix="--model=")
    assert replace_flag_value(command, found, "/m") == "x --model=/m y"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("e --model hf/x t", "e --model '/m 1' t"),
        ("e --model=hf/x t", "e --model='/m 1' t"),
        ("e --model='hf/x' t", "e --model='/m 1' t"),
        ("e -mhf/x t", "e -m'/m 1' t"),
    ],
)
def test_replace_flag_value(command: str, expected: str) -> None:
    found = flag_value(_words(command), ("--model", "-m"), command=command)
    assert found is not None
    assert replace_flag_value(command, found, "'/m 1'") == expected


# ---------------------------------------------------------------- eval


@pytest.mark.parametrize(
    ("command", "tp", "pp", "gpus", "model"),
    [
        ("trtllm-eval --model m gsm8k", 1, 1, None, "m"),
        ("trtllm-eval --model=m --tp_size 4 --pp_size=2 mmlu", 4, 2, None, "m"),
        ("trtllm-eval --tp_size 2 --tp_size=8 gsm8k", 8, 1, None, None),
        ("trtllm-eval --tp 2 --pp 2 --ep 2 gsm8k", 2, 2, None, None),
        ("trtllm-eval --ep_size 4 --gpus_per_node 4 gsm8k", 1, 1, 4, None),
        ("trtllm-llmapi-launch trtllm-eval --tp_size 2 gsm8k", 2, 1, None, None),
        ("A=1 B='x y' env -u C trtllm-eval --tp_size 2 gsm8k", 2, 1, None, None),
        ("/usr/local/bin/trtllm-eval --tp_size 2 gsm8k", 2, 1, None, None),
        (
            "pip install x --tp_size 9 && trtllm-eval --model 'my model' --tp_size 2 gsm8k",
            2, 1, None, "my model",
        ),
        (
            "trtllm-eval --tp_size 2 gsm8k; trtllm-eval --tp_size 4 mmlu",
            4, 1, None, None,
        ),
        ("python -m tensorrt_llm.commands.eval --tp_size 2 --model m gsm8k", 2, 1, None, "m"),
        ("trtllm-eval --model m gsm8k --extra 'a --tp_size 8'", 1, 1, None, "m"),
        (
            "trtllm-eval --model m \\\n  --tp_size 2 \\\n  gsm8k # comment --tp_size 8",
            2, 1, None, "m",
        ),
    ],
)  # fmt: skip
def test_parse_eval_cmd(
    command: str, tp: int, pp: int, gpus: int | None, model: str | None
) -> None:
    args = parse_eval_cmd(command)
    assert isinstance(args, EvalArgs)
    assert (args.tp_size, args.pp_size, args.gpus_per_node) == (tp, pp, gpus)
    assert (args.model.value if args.model else None) == model


def test_eval_model_span_points_into_command() -> None:
    command = "trtllm-llmapi-launch trtllm-eval --model=meta-llama/Llama-3.1-8B gsm8k"
    model = parse_eval_cmd(command).model
    assert model is not None and model.literal
    assert command[model.start : model.end] == "meta-llama/Llama-3.1-8B"
    assert replace_flag_value(command, model, "/models/llama") == (
        "trtllm-llmapi-launch trtllm-eval --model=/models/llama gsm8k"
    )


def test_eval_model_with_expansion_is_not_literal() -> None:
    model = parse_eval_cmd('trtllm-eval --model "$MODEL_DIR/llama" gsm8k').model
    assert model is not None and model.value == "$MODEL_DIR/llama" and not model.literal


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            "trtllm-eval --tp_size x gsm8k",
            "eval_cmd: --tp_size must be a positive integer, got 'x'",
        ),
        (
            "trtllm-eval --tp_size=0 gsm8k",
            "eval_cmd: --tp_size must be a positive integer, got '0'",
        ),
        (
            "trtllm-eval --pp_size -1 gsm8k",
            "eval_cmd: --pp_size must be a positive integer, got '-1'",
        ),
        ("trtllm-eval --tp 1.5 gsm8k", "eval_cmd: --tp must be a positive integer, got '1.5'"),
        ("trtllm-eval --gpus_per_node=a", "eval_cmd: --gpus_per_node must be a positive integer"),
        ("trtllm-eval --tp_size $TP gsm8k", "shell expansions are not evaluated"),
        ("trtllm-eval --tp_size", "eval_cmd: --tp_size is missing its value"),
        (
            "trtllm-eval --model 'x gsm8k",
            "eval_cmd: unterminated single quote starting at column 21",
        ),
        ("", "eval_cmd is empty"),
        ("   # only a comment", "eval_cmd is empty"),
    ],
)
def test_parse_eval_cmd_errors(command: str, message: str) -> None:
    with pytest.raises(CommandArgError) as info:
        parse_eval_cmd(command)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)


# ---------------------------------------------------------------- bench

PREP = (
    "trtllm-bench --model meta-llama/Llama-3.1-8B prepare-dataset --output /tmp/d.json "
    "token-norm-dist --num-requests 100 --input-mean 128 --output-mean 128 "
    "--input-stdev 0 --output-stdev 0"
)
RUN = (
    "trtllm-bench --model meta-llama/Llama-3.1-8B --model_path /models/llama "
    "throughput --tp 2 --pp=2 --ep 4 --dataset /tmp/d.json"
)


def test_parse_bench_cmd_prep_and_run() -> None:
    command = f"{PREP} && {RUN}"
    args = parse_bench_cmd(command)
    assert args == BenchArgs(
        prep_cmd=PREP,
        run_cmd=RUN,
        tp=2,
        pp=2,
        model=args.model,
        model_path=args.model_path,
    )
    assert args.model is not None and args.model.value == "meta-llama/Llama-3.1-8B"
    # The span is the run step's --model (the last invocation), in the full command.
    assert args.model.start > len(PREP)
    assert args.model_path is not None
    assert command[args.model_path.start : args.model_path.end] == "/models/llama"


@pytest.mark.parametrize(
    ("command", "prep", "run", "tp", "pp"),
    [
        ("trtllm-bench --model m throughput", "", "trtllm-bench --model m throughput", 1, 1),
        ("  trtllm-bench -m m latency --tp=4  ", "", "trtllm-bench -m m latency --tp=4", 4, 1),
        (
            "trtllm-bench -m m prepare-dataset --tp 8 && trtllm-bench -m m throughput",
            "trtllm-bench -m m prepare-dataset --tp 8", "trtllm-bench -m m throughput", 1, 1,
        ),
        (
            "a --tp 8 && trtllm-bench -m m throughput --tp 2 --tp 4 --ep 0 | tee out.log",
            "a --tp 8", "trtllm-bench -m m throughput --tp 2 --tp 4 --ep 0 | tee out.log",
            4, 1,
        ),
        (
            "trtllm-bench -m m throughput --extra 'x && y' --tp 2",
            "", "trtllm-bench -m m throughput --extra 'x && y' --tp 2", 2, 1,
        ),
        (
            "python prep.py --out \"$(date && echo x)\" && trtllm-bench -m m throughput",
            "python prep.py --out \"$(date && echo x)\"", "trtllm-bench -m m throughput", 1, 1,
        ),
        (
            "trtllm-bench -m m prepare-dataset \\\n  --output d \\\n  && \\\n"
            "  trtllm-llmapi-launch trtllm-bench -m m throughput \\\n    --tp 2",
            "trtllm-bench -m m prepare-dataset \\\n  --output d",
            "trtllm-llmapi-launch trtllm-bench -m m throughput \\\n    --tp 2", 2, 1,
        ),
        (
            "{ mkdir -p d && prep; } && trtllm-bench -m m throughput --pp 2",
            "{ mkdir -p d && prep; }", "trtllm-bench -m m throughput --pp 2", 1, 2,
        ),
        ("python bench.py --tp 2 --model m", "", "python bench.py --tp 2 --model m", 2, 1),
    ],
)  # fmt: skip
def test_parse_bench_cmd(command: str, prep: str, run: str, tp: int, pp: int) -> None:
    args = parse_bench_cmd(command)
    assert (args.prep_cmd, args.run_cmd, args.tp, args.pp) == (prep, run, tp, pp)


@pytest.mark.parametrize(
    ("command", "model", "model_path"),
    [
        ("trtllm-bench --model a throughput", "a", None),
        ("trtllm-bench -m a --model_path /p throughput", "a", "/p"),
        ("trtllm-bench --model=a --model_path=/p throughput", "a", "/p"),
        ("trtllm-bench --model a prepare-dataset && trtllm-bench --model b throughput", "b", None),
        (
            "trtllm-bench --model a --model_path /p prepare-dataset && trtllm-bench throughput",
            "a", "/p",
        ),
        ("trtllm-bench throughput", None, None),
        ("python -m tensorrt_llm.commands.bench --model_path /p throughput", None, "/p"),
    ],
)  # fmt: skip
def test_parse_bench_cmd_model(command: str, model: str | None, model_path: str | None) -> None:
    args = parse_bench_cmd(command)
    assert (args.model.value if args.model else None) == model
    assert (args.model_path.value if args.model_path else None) == model_path


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("a && b && c", "bench_cmd: more than one top-level '&&' (2 found)"),
        ("a && b && c", "split prepare and run into at most two commands"),
        ("", "bench_cmd is empty"),
        ("   \n  ", "bench_cmd is empty"),
        ("&& trtllm-bench -m m throughput", "bench_cmd: nothing before '&&'"),
        ("prep &&", "bench_cmd: nothing after '&&'"),
        (
            "trtllm-bench -m m throughput --tp two",
            "bench_cmd: --tp must be a positive integer, got 'two'",
        ),
        (
            "trtllm-bench -m m throughput --pp 0",
            "bench_cmd: --pp must be a positive integer, got '0'",
        ),
        ("trtllm-bench -m m throughput --tp=$N", "shell expansions are not evaluated"),
        ('trtllm-bench -m "m throughput', "bench_cmd: unterminated double quote"),
    ],
)
def test_parse_bench_cmd_errors(command: str, message: str) -> None:
    with pytest.raises(CommandArgError) as info:
        parse_bench_cmd(command)
    assert message in str(info.value)


# ---------------------------------------------------------------- model names


@pytest.mark.parametrize(
    ("model", "name"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "llama_3_1_8b_instruct"),
        ("Llama-3.1-8B-Instruct", "llama_3_1_8b_instruct"),
        ("/models/Qwen2.5-7B/", "qwen2_5_7b"),
        ("/scratch/llm-models/llama-3.1-model/8B-Instruct", "8b_instruct"),
        ("deepseek-ai/DeepSeek-V3", "deepseek_v3"),
        ("__a--b__", "a_b"),
        ("nvidia/Llama-3.3-70B-Instruct-FP8//", "llama_3_3_70b_instruct_fp8"),
    ],
)
def test_model_name_from(model: str, name: str) -> None:
    assert model_name_from(model) == name


@pytest.mark.parametrize("model", ["", "/", "---", "org/日本"])
def test_model_name_from_nothing_usable(model: str) -> None:
    assert model_name_from(model) == ""


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", True),
        ("org/name/sub", True),
        ("/models/llama", False),
        ("./llama/x", False),
        ("../llama/x", False),
        ("~/models/x", False),
        ("$LLM_MODELS_ROOT/llama", False),
        ("llama", False),
        ("", False),
    ],
)
def test_is_hf_model_id(model: str, expected: bool) -> None:
    assert is_hf_model_id(model) is expected


# ---------------------------------------------------------------- flags passed through


@pytest.mark.parametrize(
    ("workflow", "field", "command"),
    [
        ("eval", "eval_cmd", 'trtllm-eval --model M --tp_size 2 --ep_size "$EP" mmlu'),
        ("eval", "eval_cmd", "trtllm-eval --model M --tp 2 --ep=any mmlu"),
        ("bench", "bench_cmd", 'trtllm-bench --model m throughput --tp 2 --ep "$EP"'),
        ("bench", "bench_cmd", "trtllm-bench --model m throughput --tp 2 --ep -1"),
    ],
)
def test_expert_parallel_flags_pass_through(
    build_env: BuildEnv, workflow: str, field: str, command: str
) -> None:
    job = build_env.build(build_env.request(workflow, **{field: command}, model_name="m"))
    assert job.job_spec_data["required_devices"] == 2
    assert quote_literal(command) in job.script_text

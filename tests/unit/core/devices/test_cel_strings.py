"""cel-go's string extension (version 2, as kube's CEL environment has it) and its
`format`, run through the selectors' CEL: results and errors as cel-go gives them."""

from __future__ import annotations

import re

import pytest

from splitsched.core.devices import cel_format, selectors
from tests.support.devices import device

DEVICE = device("dev-0", "gpu.example.com", model="A100")


def run(source: str) -> bool:
    view = selectors.CelDevice("gpu.example.com", DEVICE)
    return view.matches(selectors.compile_selector(source))


@pytest.mark.parametrize(
    "source",
    [
        # charAt counts characters, and the length itself gives "".
        "'kayak'.charAt(2) == 'y' && 'kayak'.charAt(5) == ''",
        "'a©βc'.charAt(1) == '©' && 'a©βc'.charAt(2) == 'β'",
        # indexOf / lastIndexOf, with and without an offset; "" is found where the search starts.
        "'banana'.indexOf('an') == 1 && 'banana'.indexOf('an', 2) == 3",
        "'banana'.indexOf('x') == -1 && 'banana'.indexOf('') == 0 && 'banana'.indexOf('', 4) == 4",
        "'banana'.lastIndexOf('an') == 3 && 'banana'.lastIndexOf('an', 2) == 1",
        "'banana'.lastIndexOf('') == 6 && 'banana'.lastIndexOf('', 2) == 2",
        "'banana'.lastIndexOf('nana', 5) == 2 && 'ab'.lastIndexOf('abc') == -1",
        "'x©y©z'.indexOf('©', 2) == 3 && 'x©y©z'.lastIndexOf('©') == 3",
        # kube's list library shares the names.
        "[3, 1, 3].indexOf(3) == 0 && [3, 1, 3].lastIndexOf(3) == 2 && [1].indexOf(2) == -1",
        "[true, 1].indexOf(1) == 1",
        # ASCII only.
        "'GPU-Ä'.lowerAscii() == 'gpu-Ä' && 'gpu-ä'.upperAscii() == 'GPU-ä'",
        # replace, with a limit; a negative limit replaces all, 0 none.
        "'a-b-c'.replace('-', '+') == 'a+b+c' && 'a-b-c'.replace('-', '+', 1) == 'a+b-c'",
        "'a-b-c'.replace('-', '', -1) == 'abc' && 'a-b-c'.replace('-', '+', 0) == 'a-b-c'",
        "'ab'.replace('', '.') == '.a.b.'",
        # split, with a limit on the pieces; an empty separator splits into characters.
        "'a.b.c'.split('.') == ['a', 'b', 'c'] && 'a.b.c'.split('.', 2) == ['a', 'b.c']",
        "'a.b.c'.split('.', 0) == [] && 'a.b.c'.split('.', -1) == ['a', 'b', 'c']",
        "'abc'.split('') == ['a', 'b', 'c'] && 'abc'.split('', 2) == ['a', 'bc']",
        "''.split('') == [] && ''.split(',') == ['']",
        "'a.b'.split('.', 1) == ['a.b']",
        # substring: start inclusive, end exclusive, both within the length.
        "'selector'.substring(4) == 'ctor' && 'selector'.substring(0, 3) == 'sel'",
        "'selector'.substring(8) == '' && 'sel©'.substring(3, 4) == '©'",
        # trim takes what Go's unicode.IsSpace calls space, not zero-width characters.
        "' \\t\\n\\u00a0\\u3000x\\u2028 '.trim() == 'x'",
        "'\\u200bx\\ufeff'.trim() == '\\u200bx\\ufeff' && '\\x1cx'.trim() == '\\x1cx'",
        # join (version 2): strings only.
        "['a', 'b'].join() == 'ab' && ['a', 'b'].join(', ') == 'a, b' && [].join('-') == ''",
        'strings.quote("a\\"b\\\\c\\n") == "\\"a\\\\\\"b\\\\\\\\c\\\\n\\""',
        # Used on the device, as a selector would.
        "device.driver.substring(0, device.driver.indexOf('.')) == 'gpu'",
        "device.attributes[device.driver].model.lowerAscii().startsWith('a1')",
    ],
)
def test_string_functions_answer_as_cel_go_does(source: str) -> None:
    assert run(source) is True


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("'abc'.charAt(4) == ''", "index out of range: 4"),
        ("'abc'.charAt(-1) == ''", "index out of range: -1"),
        ("'abc'.indexOf('a', 3) == 0", "index out of range: 3"),
        ("''.indexOf('a') == -1", "index out of range: 0"),  # as cel-go does
        ("'abc'.lastIndexOf('a', -1) == 0", "index out of range: -1"),
        ("'abc'.substring(4) == ''", "index out of range: 4"),
        ("'abc'.substring(2, 1) == ''", "invalid substring range. start: 2, end: 1"),
        ("'abc'.substring(1, 9) == ''", "index out of range: 9"),
        ("[1, 'a'].join() == ''", "join: invalid input: 1"),
        ("'abc'.charAt(true) == ''", "no such overload: charAt(string, bool)"),
        ("'abc'.indexOf('a', 0, 1) == 0", "no such overload: indexOf(string, string, int, int)"),
        ("'abc'.split(1) == []", "no such overload: split(string, int)"),
        ("42.trim() == ''", "no such overload: trim(int)"),
    ],
)
def test_string_functions_fail_as_cel_go_does(source: str, error: str) -> None:
    with pytest.raises(selectors.SelectorError, match=re.escape(error)):
        run(source)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('"no clauses".format([])', "no clauses"),
        ('"%s is %d, %% done".format(["gpu", 3])', "gpu is 3, % done"),
        ('"%s %s %s %s".format([true, null, 2.5, b"raw"])', "true null 2.5 raw"),
        ('"%s|%s|%s".format([1000000.0, 123456.0, 0.00001])', "1e+06|123456|1e-05"),
        ('"%s".format([["a", 1, 2.5, [true], b"x"]])', '["a", 1, 2.500000, [true], b"x"]'),
        ('"%s".format([{"b": 1, "a": "x"}])', '{"a":"x", "b":1}'),
        ('"%s".format([{2: 1.0, 1: null}])', "{1:null, 2:1.000000}"),
        ('"%f|%.2f|%.0f".format([2.5, 1234.567, 1.5])', "2.500000|1,234.57|2"),
        ('"%.3f".format([-1234567.0])', "-1,234,567.000"),
        ('"%b|%b|%o|%x|%X".format([5, true, 8, 255, 255])', "101|1|10|ff|FF"),
        ('"%x|%X".format(["Hi", b"\\x01"])', "4869|01"),
        ('"%d".format([-7])', "-7"),
        (
            '"%s-%s".format([device.driver, device.attributes[device.driver].model])',
            "gpu.example.com-A100",
        ),
    ],
)
def test_format_prints_as_kubes_cel_go_does(source: str, expected: str) -> None:
    assert run(f"{source} == {cel_format._go_quote(expected)}") is True


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ('"%s %s".format(["a"])', "index 1 out of range"),
        ('"100%".format([1])', "unexpected end of string"),
        (
            '"%q".format([1])',
            'could not parse formatting clause: unrecognized formatting clause "q"',
        ),
        ('"%.2".format([1.0])', "could not find end of precision specifier"),
        ('"%.f".format([1.0])', 'strconv.Atoi: parsing "": invalid syntax'),
        (
            '"%d".format([1.5])',
            "error during formatting: decimal clause can only be used on integers, was given "
            "double",
        ),
        ('"%f".format([1])', "fixed-point clause can only be used on doubles, was given int"),
        (
            '"%b".format(["1"])',
            "only integers and bools can be formatted as binary, was given string",
        ),
        ('"%x".format([1.0])', "formatted as hex, was given double"),
        ('"%o".format([true])', "octal clause can only be used on integers, was given bool"),
        ('"%s".format([quantity("1Gi")])', "was given kubernetes.Quantity"),
        ('"%e".format([1.0])', "not supported here"),
        ('"%f".format([double("NaN")])', "not supported here"),
        ('"%s".format("a")', "no such overload: format(string, string)"),
    ],
)
def test_format_fails_as_kubes_cel_go_does(source: str, error: str) -> None:
    with pytest.raises(selectors.SelectorError, match=re.escape(error)):
        run(f"{source} == ''")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "-0"),
        (1.0, "1"),
        (-2.5, "-2.5"),
        (100000.0, "100000"),
        (999999.0, "999999"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00012, "0.00012"),
        (1e-5, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (1e100, "1e+100"),
        (0.1 + 0.2, "0.30000000000000004"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (float("nan"), "NaN"),
    ],
)
def test_a_double_prints_as_gos_shortest_g(value: float, text: str) -> None:
    assert cel_format.go_g(value) == text

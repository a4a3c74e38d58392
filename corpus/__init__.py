"""The corpus: the case format and its loader (cases.py), the cases kport ships (cases/, as
package data), and what checks a kernel against a case: the oracle and the judges (check.py),
a port's package check (port_check.py), the static checks (static_checks.py) and the jailed
Python reference (reference_child.py). It needs only runners; kb, agent and evals build on it.
"""

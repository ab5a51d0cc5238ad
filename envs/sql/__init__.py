"""SQL environments: questions answered by querying read-only databases (SQLite embedded,
PostgreSQL as a server), graded by execution match against a gold query."""

from toolgym.envs.sql.edit import EditSQLEnv
from toolgym.envs.sql.env import SQLEnv
from toolgym.envs.sql.generate import Database, build, write_sqlite
from toolgym.envs.sql.grading import Match, compare, gold_mode
from toolgym.envs.sql.propose import ProposeSQLEnv
from toolgym.envs.sql.questions import Question, generate_question
from toolgym.envs.sql.results import DatabaseUnavailable, QueryError, QueryLimits, QueryResult

__all__ = [
    "Database",
    "DatabaseUnavailable",
    "EditSQLEnv",
    "Match",
    "ProposeSQLEnv",
    "QueryError",
    "QueryLimits",
    "QueryResult",
    "Question",
    "SQLEnv",
    "build",
    "compare",
    "generate_question",
    "gold_mode",
    "write_sqlite",
]  # fmt: skip

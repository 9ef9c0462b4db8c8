"""Which head does what, in plain words: one line per head from a run's tables (`headlab-report`).

    from headlab.report import report_lines, run_report
    report_lines(head_metrics, importance, summary)  # pure: tables in, lines out
    run_report(RunDir("runs/.../"))                   # reads the run folder's tables
"""

from headlab.report.folder import ReportCommand, run_report, sweep_report
from headlab.report.heads import HeadLine, describe_reading, head_report, key_tokens, reading, report_lines, top_target

__all__ = ["HeadLine", "ReportCommand", "describe_reading", "head_report", "key_tokens", "reading", "report_lines",
           "run_report", "sweep_report", "top_target"]

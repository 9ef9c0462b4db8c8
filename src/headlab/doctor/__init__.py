"""headlab-doctor: the founding article's closing advice as checks over a run's tables."""

from headlab.doctor.checks import FAIL, NOT_MEASURED, OK, WARN, Finding, RunTables, Thresholds, run_checks
from headlab.doctor.report import DOCTOR_JSON, Diagnosis, DoctorCommand, diagnose, diagnose_run, format_diagnosis

__all__ = ["DOCTOR_JSON", "FAIL", "NOT_MEASURED", "OK", "WARN", "Diagnosis", "DoctorCommand", "Finding", "RunTables", "Thresholds",
           "diagnose", "diagnose_run", "format_diagnosis", "run_checks"]

// Transitional: the model types (ImageIdentity, RegisterState, ReportError) moved to Snapshot.
@_exported import Snapshot

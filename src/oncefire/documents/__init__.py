"""Documents, Firestore-shaped: collections, references, queries and transactions."""

from oncefire.documents.references import CollectionReference, Database, DocumentReference
from oncefire.documents.transaction import Transaction

__all__ = ["CollectionReference", "Database", "DocumentReference", "Transaction"]

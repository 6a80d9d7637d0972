"""The Firestore client's surface (`google.cloud.firestore`, `firebase_admin.firestore`) over
the App's documents: what `oncefire port` rewrites those imports to.

    db = firestore.client()
    db.collection("cities").where(filter=firestore.FieldFilter("pop", ">", 1e6)).get()

References, snapshots, queries, aggregations, batches, transactions and field transforms;
real-time listeners (on_snapshot) are not offered. See docs/firebase.md.
"""

from oncefire.errors import TransactionAbortedError
from oncefire.firebase.firestore.aggregation import (
    AggregationQuery,
    AggregationResult,
    AvgAggregation,
    CountAggregation,
    SumAggregation,
)
from oncefire.firebase.firestore.client import Client, client
from oncefire.firebase.firestore.collection import CollectionGroup, CollectionReference
from oncefire.firebase.firestore.document import (
    DocumentReference,
    DocumentSnapshot,
    WriteResult,
    auto_id,
)
from oncefire.firebase.firestore.filters import And, FieldFilter, Or
from oncefire.firebase.firestore.ordering import FieldPath
from oncefire.firebase.firestore.query import Query
from oncefire.firebase.firestore.writes import (
    ReadAfterWriteError,
    Transaction,
    WriteBatch,
    transactional,
)
from oncefire.model.codec import GeoPoint
from oncefire.transforms import (
    DELETE_FIELD,
    SERVER_TIMESTAMP,
    ArrayRemove,
    ArrayUnion,
    Increment,
    Maximum,
    Minimum,
)

__all__ = [
    "DELETE_FIELD",
    "SERVER_TIMESTAMP",
    "AggregationQuery",
    "AggregationResult",
    "And",
    "ArrayRemove",
    "ArrayUnion",
    "AvgAggregation",
    "Client",
    "CollectionGroup",
    "CollectionReference",
    "CountAggregation",
    "DocumentReference",
    "DocumentSnapshot",
    "FieldFilter",
    "FieldPath",
    "GeoPoint",
    "Increment",
    "Maximum",
    "Minimum",
    "Or",
    "Query",
    "ReadAfterWriteError",
    "SumAggregation",
    "Transaction",
    "TransactionAbortedError",
    "WriteBatch",
    "WriteResult",
    "auto_id",
    "client",
    "transactional",
]

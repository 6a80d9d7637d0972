# A Firebase Cloud Functions main.py with callable functions, written from Firebase's public
# documentation of https_fn.on_call, HttpsError and CallableRequest. It is kept in Firebase's
# spelling: the tests run `oncefire port` on it and serve the result unchanged.

from typing import Any

from firebase_admin import firestore, initialize_app
from firebase_functions import https_fn, options

initialize_app()


@https_fn.on_call()
def addnumbers(req: https_fn.CallableRequest) -> Any:
    """Add two numbers the client sends."""
    try:
        first = int(req.data["firstNumber"])
        second = int(req.data["secondNumber"])
    except (KeyError, TypeError, ValueError):
        raise https_fn.HttpsError(
            code=https_fn.FunctionsErrorCode.INVALID_ARGUMENT,
            message='The function must be called with two arguments, "firstNumber" and "secondNumber".',
            details={"got": req.data},
        )
    return {"firstNumber": first, "secondNumber": second, "operationResult": first + second}


@https_fn.on_call(cors=options.CorsOptions(cors_origins="https://app.example", cors_methods="post"))
def addmessage(req: https_fn.CallableRequest) -> Any:
    """Save a message for the signed-in user."""
    if req.auth is None:
        raise https_fn.HttpsError(
            code=https_fn.FunctionsErrorCode.UNAUTHENTICATED,
            message="The function must be called while authenticated.",
        )
    text = req.data.get("text") if isinstance(req.data, dict) else None
    if not text:
        raise https_fn.HttpsError(https_fn.FunctionsErrorCode.FAILED_PRECONDITION, "No text.")
    _, ref = (
        firestore.client()
        .collection("messages")
        .add({"text": text, "author": {"uid": req.auth.uid, "name": req.auth.token.get("name")}})
    )
    return {"id": ref.id, "uid": req.auth.uid}


@https_fn.on_call()
def checkstock(req: https_fn.CallableRequest) -> Any:
    """Errors of each kind, as a client sees them."""
    kind = req.data
    if kind == "missing":
        raise https_fn.HttpsError(https_fn.FunctionsErrorCode.NOT_FOUND, "No such item.")
    if kind == "denied":
        raise https_fn.HttpsError(https_fn.FunctionsErrorCode.PERMISSION_DENIED, "Not yours.")
    if kind == "busy":
        raise https_fn.HttpsError(https_fn.FunctionsErrorCode.UNAVAILABLE, "Try later.")
    if kind == "broken":
        raise RuntimeError("the secret database password is hunter2")
    return {"inStock": True, "auth": None if req.auth is None else req.auth.uid}

# A Firebase Cloud Functions main.py with HTTP functions, written from Firebase's public
# documentation of https_fn.on_request, CORS options, params and the logger. It is kept in
# Firebase's spelling: the tests run `oncefire port` on it and serve the result unchanged.

import flask
from firebase_admin import firestore, initialize_app
from firebase_functions import https_fn, logger, options, params

GREETING = params.StringParam("GREETING")
MAX_ITEMS = params.IntParam("MAX_ITEMS", default=3)
MIN_INSTANCES = params.IntParam("MIN_INSTANCES", default=0)
ALLOWED_ORIGIN = params.StringParam("ALLOWED_ORIGIN", default="https://shop.example")

app = initialize_app()
options.set_global_options(region=options.SupportedRegion.EUROPE_WEST1, max_instances=20)

# A whole Flask app served by one function: /widgets and everything below it.
widgets_app = flask.Flask(__name__)


@widgets_app.get("/")
def list_widgets():
    names = [doc.id for doc in firestore.client().collection("widgets").stream()]
    return flask.jsonify(widgets=names[: MAX_ITEMS.value])


@widgets_app.post("/")
def add_widget():
    body = flask.request.get_json()
    if not body or "name" not in body:
        return {"error": "name is required"}, 400
    firestore.client().collection("widgets").document(body["name"]).set(body)
    logger.info("widget added", name=body["name"], path=flask.request.path)
    return "created", 201, {"Location": flask.url_for("get_widget", name=body["name"])}


@widgets_app.get("/<name>")
def get_widget(name: str):
    snapshot = firestore.client().collection("widgets").document(name).get()
    if not snapshot.exists:
        flask.abort(404)
    return flask.jsonify(snapshot.to_dict())


@https_fn.on_request(
    memory=options.MemoryOption.MB_512,
    min_instances=MIN_INSTANCES,
    vpc_connector_egress_settings=options.VpcEgressSetting.PRIVATE_RANGES_ONLY,
    ingress=options.IngressSetting.ALLOW_ALL,
)
def widgets(req: https_fn.Request) -> https_fn.Response:
    with widgets_app.request_context(req.environ):
        return widgets_app.full_dispatch_request()


@https_fn.on_request(
    cors=options.CorsOptions(cors_origins=[ALLOWED_ORIGIN.value], cors_methods=["get", "post"])
)
def greet(req: https_fn.Request) -> https_fn.Response:
    name = req.args.get("name", "world")
    return https_fn.Response(f"{GREETING.value}, {name}!", mimetype="text/plain")


@https_fn.on_request(region=[options.SupportedRegion.US_WEST4, "asia-south1"], timeout_sec=30)
def describe(req: https_fn.Request):
    return flask.jsonify(
        method=req.method,
        path=req.path,
        script_root=req.script_root,
        args=req.args.to_dict(),
        project=params.PROJECT_ID.value,
        bucket=app.options.get("storageBucket"),
    )

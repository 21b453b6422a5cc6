"""GENERATED FILE, do not edit: ``verify/contract_schema.json`` compiled by fastjsonschema 2.22.3
(``compile_to_code``, no defaults, no formats). Regenerate with
``.venv/bin/python scripts/contract_schema_check.py``; a test checks that doing so gives this text.
``validate`` (fastjsonschema's ``validate_https___kernel_ledger_invalid_contract_schema_json``) returns the document or raises
``fastjsonschema.JsonSchemaValueException`` at the first error (``verify.contract_lint``).
"""
# ruff: noqa
# mypy: ignore-errors

VERSION = "2.22.3"
from decimal import Decimal
import re
from fastjsonschema import JsonSchemaValueException, JsonSchemaValuesException


REGEX_PATTERNS = {
    '^sm_[0-9]{2,3}[a-z]?$': re.compile('^sm_[0-9]{2,3}[a-z]?\\Z'),
    '^[A-Za-z0-9_+*/%(),\\s-]+(<=|>=|==|!=|<|>)[A-Za-z0-9_+*/%(),\\s-]+$': re.compile('^[A-Za-z0-9_+*/%(),\\s-]+(<=|>=|==|!=|<|>)[A-Za-z0-9_+*/%(),\\s-]+\\Z'),
    '^[A-Za-z0-9_+*/%(),\\s-]+$': re.compile('^[A-Za-z0-9_+*/%(),\\s-]+\\Z'),
    '^[A-Za-z_][A-Za-z0-9_]*$': re.compile('^[A-Za-z_][A-Za-z0-9_]*\\Z')
}

NoneType = type(None)

def validate_https___kernel_ledger_invalid_contract_schema_json(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['metadata']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
        data_keys = set(data.keys())
        if "metadata" in data_keys:
            data_keys.remove("metadata")
            data__metadata = data["metadata"]
            if not isinstance(data__metadata, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".metadata must be object")
            data__metadata_is_dict = isinstance(data__metadata, dict)
            if data__metadata_is_dict:
                data__metadata_keys = set(data__metadata.keys())
                if "version" in data__metadata_keys:
                    data__metadata_keys.remove("version")
                    data__metadata__version = data__metadata["version"]
                    if not isinstance(data__metadata__version, (str, int, float, Decimal)) or isinstance(data__metadata__version, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".metadata.version must be string or number")
                if "description" in data__metadata_keys:
                    data__metadata_keys.remove("description")
                    data__metadata__description = data__metadata["description"]
                    if not isinstance(data__metadata__description, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".metadata.description must be string")
                if "references" in data__metadata_keys:
                    data__metadata_keys.remove("references")
                    data__metadata__references = data__metadata["references"]
                    if not isinstance(data__metadata__references, (list, tuple)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".metadata.references must be array")
                    data__metadata__references_is_list = isinstance(data__metadata__references, (list, tuple))
                    if data__metadata__references_is_list:
                        data__metadata__references_len = len(data__metadata__references)
                        for data__metadata__references_x, data__metadata__references_item in enumerate(data__metadata__references):
                            if not isinstance(data__metadata__references_item, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".metadata.references[{data__metadata__references_x}]".format(**locals()) + " must be string")
        if "equations" in data_keys:
            data_keys.remove("equations")
            data__equations = data["equations"]
            if not isinstance(data__equations, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations must be object")
            data__equations_is_dict = isinstance(data__equations, dict)
            if data__equations_is_dict:
                data__equations_keys = set(data__equations.keys())
                for data__equations_key in data__equations_keys:
                    if data__equations_key not in []:
                        data__equations_value = data__equations.get(data__equations_key)
                        if not isinstance(data__equations_value, (dict)):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations.{data__equations_key}".format(**locals()) + " must be object")
                        data__equations_value_is_dict = isinstance(data__equations_value, dict)
                        if data__equations_value_is_dict:
                            data__equations_value_keys = set(data__equations_value.keys())
                            if "formula" in data__equations_value_keys:
                                data__equations_value_keys.remove("formula")
                                data__equations_value__formula = data__equations_value["formula"]
                                if not isinstance(data__equations_value__formula, (str, int, float, Decimal)) or isinstance(data__equations_value__formula, bool):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations.{data__equations_key}.formula".format(**locals()) + " must be string or number")
                            if "domain" in data__equations_value_keys:
                                data__equations_value_keys.remove("domain")
                                data__equations_value__domain = data__equations_value["domain"]
                                if not isinstance(data__equations_value__domain, (str)):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations.{data__equations_key}.domain".format(**locals()) + " must be string")
                            if "lean_theorem" in data__equations_value_keys:
                                data__equations_value_keys.remove("lean_theorem")
                                data__equations_value__leantheorem = data__equations_value["lean_theorem"]
                                if not isinstance(data__equations_value__leantheorem, (str)):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations.{data__equations_key}.lean_theorem".format(**locals()) + " must be string")
                            if "invariants" in data__equations_value_keys:
                                data__equations_value_keys.remove("invariants")
                                data__equations_value__invariants = data__equations_value["invariants"]
                                if not isinstance(data__equations_value__invariants, (list, tuple)):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".equations.{data__equations_key}.invariants".format(**locals()) + " must be array")
        if "proof_obligations" in data_keys:
            data_keys.remove("proof_obligations")
            data__proofobligations = data["proof_obligations"]
            if not isinstance(data__proofobligations, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations must be array")
            data__proofobligations_is_list = isinstance(data__proofobligations, (list, tuple))
            if data__proofobligations_is_list:
                data__proofobligations_len = len(data__proofobligations)
                for data__proofobligations_x, data__proofobligations_item in enumerate(data__proofobligations):
                    if not isinstance(data__proofobligations_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}]".format(**locals()) + " must be object")
                    data__proofobligations_item_is_dict = isinstance(data__proofobligations_item, dict)
                    if data__proofobligations_item_is_dict:
                        data__proofobligations_item_keys = set(data__proofobligations_item.keys())
                        if "type" in data__proofobligations_item_keys:
                            data__proofobligations_item_keys.remove("type")
                            data__proofobligations_item__type = data__proofobligations_item["type"]
                            if not isinstance(data__proofobligations_item__type, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].type".format(**locals()) + " must be string")
                        if "property" in data__proofobligations_item_keys:
                            data__proofobligations_item_keys.remove("property")
                            data__proofobligations_item__property = data__proofobligations_item["property"]
                            if not isinstance(data__proofobligations_item__property, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].property".format(**locals()) + " must be string")
                        if "formal" in data__proofobligations_item_keys:
                            data__proofobligations_item_keys.remove("formal")
                            data__proofobligations_item__formal = data__proofobligations_item["formal"]
                            if not isinstance(data__proofobligations_item__formal, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].formal".format(**locals()) + " must be string")
                        if "lean" in data__proofobligations_item_keys:
                            data__proofobligations_item_keys.remove("lean")
                            data__proofobligations_item__lean = data__proofobligations_item["lean"]
                            if not isinstance(data__proofobligations_item__lean, (dict)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].lean".format(**locals()) + " must be object")
                            data__proofobligations_item__lean_is_dict = isinstance(data__proofobligations_item__lean, dict)
                            if data__proofobligations_item__lean_is_dict:
                                data__proofobligations_item__lean__missing_keys = set(['theorem']) - data__proofobligations_item__lean.keys()
                                if data__proofobligations_item__lean__missing_keys:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].lean".format(**locals()) + " must contain ")
                                data__proofobligations_item__lean_keys = set(data__proofobligations_item__lean.keys())
                                if "theorem" in data__proofobligations_item__lean_keys:
                                    data__proofobligations_item__lean_keys.remove("theorem")
                                    data__proofobligations_item__lean__theorem = data__proofobligations_item__lean["theorem"]
                                    if not isinstance(data__proofobligations_item__lean__theorem, (str)):
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].lean.theorem".format(**locals()) + " must be string")
                                if "module" in data__proofobligations_item__lean_keys:
                                    data__proofobligations_item__lean_keys.remove("module")
                                    data__proofobligations_item__lean__module = data__proofobligations_item__lean["module"]
                                    if not isinstance(data__proofobligations_item__lean__module, (str)):
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].lean.module".format(**locals()) + " must be string")
                                if "status" in data__proofobligations_item__lean_keys:
                                    data__proofobligations_item__lean_keys.remove("status")
                                    data__proofobligations_item__lean__status = data__proofobligations_item__lean["status"]
                                    if not isinstance(data__proofobligations_item__lean__status, (str)):
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".proof_obligations[{data__proofobligations_x}].lean.status".format(**locals()) + " must be string")
        if "falsification_tests" in data_keys:
            data_keys.remove("falsification_tests")
            data__falsificationtests = data["falsification_tests"]
            if not isinstance(data__falsificationtests, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".falsification_tests must be array")
            data__falsificationtests_is_list = isinstance(data__falsificationtests, (list, tuple))
            if data__falsificationtests_is_list:
                data__falsificationtests_len = len(data__falsificationtests)
                for data__falsificationtests_x, data__falsificationtests_item in enumerate(data__falsificationtests):
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_falsification_test(data__falsificationtests_item, custom_formats, (name_prefix or "data") + ".falsification_tests[{data__falsificationtests_x}]".format(**locals()))
        if "certificate" in data_keys:
            data_keys.remove("certificate")
            data__certificate = data["certificate"]
            if not isinstance(data__certificate, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate must be array")
            data__certificate_is_list = isinstance(data__certificate, (list, tuple))
            if data__certificate_is_list:
                data__certificate_len = len(data__certificate)
                for data__certificate_x, data__certificate_item in enumerate(data__certificate):
                    if not isinstance(data__certificate_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}]".format(**locals()) + " must be object")
                    data__certificate_item_is_dict = isinstance(data__certificate_item, dict)
                    if data__certificate_item_is_dict:
                        data__certificate_item__missing_keys = set(['obligation', 'theorem', 'property']) - data__certificate_item.keys()
                        if data__certificate_item__missing_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}]".format(**locals()) + " must contain ")
                        data__certificate_item_keys = set(data__certificate_item.keys())
                        if "obligation" in data__certificate_item_keys:
                            data__certificate_item_keys.remove("obligation")
                            data__certificate_item__obligation = data__certificate_item["obligation"]
                            if not isinstance(data__certificate_item__obligation, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}].obligation".format(**locals()) + " must be string")
                        if "theorem" in data__certificate_item_keys:
                            data__certificate_item_keys.remove("theorem")
                            data__certificate_item__theorem = data__certificate_item["theorem"]
                            if not isinstance(data__certificate_item__theorem, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}].theorem".format(**locals()) + " must be string")
                            if isinstance(data__certificate_item__theorem, str):
                                data__certificate_item__theorem_len = len(data__certificate_item__theorem)
                                if data__certificate_item__theorem_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}].theorem".format(**locals()) + " must be longer than or equal to 1 characters")
                        if "property" in data__certificate_item_keys:
                            data__certificate_item_keys.remove("property")
                            data__certificate_item__property = data__certificate_item["property"]
                            if not isinstance(data__certificate_item__property, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}].property".format(**locals()) + " must be string")
                        if "statement" in data__certificate_item_keys:
                            data__certificate_item_keys.remove("statement")
                            data__certificate_item__statement = data__certificate_item["statement"]
                            if not isinstance(data__certificate_item__statement, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}].statement".format(**locals()) + " must be string")
                        if data__certificate_item_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".certificate[{data__certificate_x}]".format(**locals()) + " must not contain "+str(data__certificate_item_keys)+" properties")
        if "kernel" in data_keys:
            data_keys.remove("kernel")
            data__kernel = data["kernel"]
            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_kernel(data__kernel, custom_formats, (name_prefix or "data") + ".kernel")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_kernel(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['name', 'version']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
        data_keys = set(data.keys())
        if "name" in data_keys:
            data_keys.remove("name")
            data__name = data["name"]
            if not isinstance(data__name, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be string")
            if isinstance(data__name, str):
                data__name_len = len(data__name)
                if data__name_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".name must be longer than or equal to 1 characters")
        if "version" in data_keys:
            data_keys.remove("version")
            data__version = data["version"]
            if not isinstance(data__version, (str, int, float, Decimal)) or isinstance(data__version, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".version must be string or number")
        if "entry" in data_keys:
            data_keys.remove("entry")
            data__entry = data["entry"]
            if not isinstance(data__entry, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".entry must be string")
            if isinstance(data__entry, str):
                data__entry_len = len(data__entry)
                if data__entry_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".entry must be longer than or equal to 1 characters")
        if "target" in data_keys:
            data_keys.remove("target")
            data__target = data["target"]
            if not isinstance(data__target, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".target must be string")
            if isinstance(data__target, str):
                if not REGEX_PATTERNS['^sm_[0-9]{2,3}[a-z]?$'].search(data__target):
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".target must match pattern ^sm_[0-9]{2,3}[a-z]?$")
        if "ptx" in data_keys:
            data_keys.remove("ptx")
            data__ptx = data["ptx"]
            if not isinstance(data__ptx, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".ptx must be string")
            if isinstance(data__ptx, str):
                data__ptx_len = len(data__ptx)
                if data__ptx_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".ptx must be longer than or equal to 1 characters")
        if "source" in data_keys:
            data_keys.remove("source")
            data__source = data["source"]
            if not isinstance(data__source, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".source must be string")
        if "build" in data_keys:
            data_keys.remove("build")
            data__build = data["build"]
            if not isinstance(data__build, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".build must be array")
            data__build_is_list = isinstance(data__build, (list, tuple))
            if data__build_is_list:
                data__build_len = len(data__build)
                if data__build_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".build must contain at least 1 items")
                if data__build_len > 0:
                    data__build__0 = data__build[0]
                    if not (isinstance(data__build__0, str) and data__build__0 == 'nvcc' or isinstance(data__build__0, str) and data__build__0 == 'triton'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".build[0] must be one of ['nvcc', 'triton']")
                for data__build_x, data__build_item in enumerate(data__build[1:], 1):
                    if not isinstance(data__build_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".build[{data__build_x}]".format(**locals()) + " must be string")
        if "futhark" in data_keys:
            data_keys.remove("futhark")
            data__futhark = data["futhark"]
            if not isinstance(data__futhark, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark must be string")
        if "reference" in data_keys:
            data_keys.remove("reference")
            data__reference = data["reference"]
            data__reference_one_of_count1 = 0
            if data__reference_one_of_count1 < 2:
                try:
                    if not isinstance(data__reference, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must be string")
                    if isinstance(data__reference, str):
                        data__reference_len = len(data__reference)
                        if data__reference_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must be longer than or equal to 1 characters")
                    data__reference_one_of_count1 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if data__reference_one_of_count1 < 2:
                try:
                    if not isinstance(data__reference, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must be object")
                    data__reference_is_dict = isinstance(data__reference, dict)
                    if data__reference_is_dict:
                        data__reference__missing_keys = set(['file', 'function']) - data__reference.keys()
                        if data__reference__missing_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must contain ")
                        data__reference_keys = set(data__reference.keys())
                        if "file" in data__reference_keys:
                            data__reference_keys.remove("file")
                            data__reference__file = data__reference["file"]
                            if not isinstance(data__reference__file, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference.file must be string")
                            if isinstance(data__reference__file, str):
                                data__reference__file_len = len(data__reference__file)
                                if data__reference__file_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference.file must be longer than or equal to 1 characters")
                        if "function" in data__reference_keys:
                            data__reference_keys.remove("function")
                            data__reference__function = data__reference["function"]
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__reference__function, custom_formats, (name_prefix or "data") + ".reference.function")
                        if data__reference_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must not contain "+str(data__reference_keys)+" properties")
                    data__reference_one_of_count1 += 1
                except (JsonSchemaValueException, JsonSchemaValuesException): pass
            if data__reference_one_of_count1 != 1:
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".reference must be valid exactly by one definition")
        if "futhark_oracle" in data_keys:
            data_keys.remove("futhark_oracle")
            data__futharkoracle = data["futhark_oracle"]
            if not isinstance(data__futharkoracle, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle must be object")
            data__futharkoracle_is_dict = isinstance(data__futharkoracle, dict)
            if data__futharkoracle_is_dict:
                data__futharkoracle__missing_keys = set(['entry', 'results']) - data__futharkoracle.keys()
                if data__futharkoracle__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle must contain ")
                data__futharkoracle_keys = set(data__futharkoracle.keys())
                if "entry" in data__futharkoracle_keys:
                    data__futharkoracle_keys.remove("entry")
                    data__futharkoracle__entry = data__futharkoracle["entry"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__futharkoracle__entry, custom_formats, (name_prefix or "data") + ".futhark_oracle.entry")
                if "args" in data__futharkoracle_keys:
                    data__futharkoracle_keys.remove("args")
                    data__futharkoracle__args = data__futharkoracle["args"]
                    if not isinstance(data__futharkoracle__args, (list, tuple)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle.args must be array")
                    data__futharkoracle__args_is_list = isinstance(data__futharkoracle__args, (list, tuple))
                    if data__futharkoracle__args_is_list:
                        data__futharkoracle__args_len = len(data__futharkoracle__args)
                        for data__futharkoracle__args_x, data__futharkoracle__args_item in enumerate(data__futharkoracle__args):
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__futharkoracle__args_item, custom_formats, (name_prefix or "data") + ".futhark_oracle.args[{data__futharkoracle__args_x}]".format(**locals()))
                if "results" in data__futharkoracle_keys:
                    data__futharkoracle_keys.remove("results")
                    data__futharkoracle__results = data__futharkoracle["results"]
                    if not isinstance(data__futharkoracle__results, (list, tuple)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle.results must be array")
                    data__futharkoracle__results_is_list = isinstance(data__futharkoracle__results, (list, tuple))
                    if data__futharkoracle__results_is_list:
                        data__futharkoracle__results_len = len(data__futharkoracle__results)
                        if data__futharkoracle__results_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle.results must contain at least 1 items")
                        for data__futharkoracle__results_x, data__futharkoracle__results_item in enumerate(data__futharkoracle__results):
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__futharkoracle__results_item, custom_formats, (name_prefix or "data") + ".futhark_oracle.results[{data__futharkoracle__results_x}]".format(**locals()))
                if data__futharkoracle_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".futhark_oracle must not contain "+str(data__futharkoracle_keys)+" properties")
        if "params" in data_keys:
            data_keys.remove("params")
            data__params = data["params"]
            if not isinstance(data__params, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".params must be array")
            data__params_is_list = isinstance(data__params, (list, tuple))
            if data__params_is_list:
                data__params_len = len(data__params)
                if data__params_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".params must contain at least 1 items")
                for data__params_x, data__params_item in enumerate(data__params):
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_param(data__params_item, custom_formats, (name_prefix or "data") + ".params[{data__params_x}]".format(**locals()))
        if "launch" in data_keys:
            data_keys.remove("launch")
            data__launch = data["launch"]
            if not isinstance(data__launch, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".launch must be object")
            data__launch_is_dict = isinstance(data__launch, dict)
            if data__launch_is_dict:
                data__launch__missing_keys = set(['grid', 'block']) - data__launch.keys()
                if data__launch__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".launch must contain ")
                data__launch_keys = set(data__launch.keys())
                if "grid" in data__launch_keys:
                    data__launch_keys.remove("grid")
                    data__launch__grid = data__launch["grid"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dim3(data__launch__grid, custom_formats, (name_prefix or "data") + ".launch.grid")
                if "block" in data__launch_keys:
                    data__launch_keys.remove("block")
                    data__launch__block = data__launch["block"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dim3(data__launch__block, custom_formats, (name_prefix or "data") + ".launch.block")
                if "shared_bytes" in data__launch_keys:
                    data__launch_keys.remove("shared_bytes")
                    data__launch__sharedbytes = data__launch["shared_bytes"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data__launch__sharedbytes, custom_formats, (name_prefix or "data") + ".launch.shared_bytes")
                if data__launch_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".launch must not contain "+str(data__launch_keys)+" properties")
        if "resources" in data_keys:
            data_keys.remove("resources")
            data__resources = data["resources"]
            if not isinstance(data__resources, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources must be object")
            data__resources_is_dict = isinstance(data__resources, dict)
            if data__resources_is_dict:
                data__resources_keys = set(data__resources.keys())
                if "max_registers" in data__resources_keys:
                    data__resources_keys.remove("max_registers")
                    data__resources__maxregisters = data__resources["max_registers"]
                    if not isinstance(data__resources__maxregisters, (int)) or isinstance(data__resources__maxregisters, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.max_registers must be integer")
                    if isinstance(data__resources__maxregisters, (int, float, Decimal)) and not isinstance(data__resources__maxregisters, bool):
                        if data__resources__maxregisters < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.max_registers must be bigger than or equal to 1")
                        if data__resources__maxregisters > 255:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.max_registers must be smaller than or equal to 255")
                if "max_shared_bytes" in data__resources_keys:
                    data__resources_keys.remove("max_shared_bytes")
                    data__resources__maxsharedbytes = data__resources["max_shared_bytes"]
                    if not isinstance(data__resources__maxsharedbytes, (int)) or isinstance(data__resources__maxsharedbytes, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.max_shared_bytes must be integer")
                    if isinstance(data__resources__maxsharedbytes, (int, float, Decimal)) and not isinstance(data__resources__maxsharedbytes, bool):
                        if data__resources__maxsharedbytes < 0:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.max_shared_bytes must be bigger than or equal to 0")
                if "spills" in data__resources_keys:
                    data__resources_keys.remove("spills")
                    data__resources__spills = data__resources["spills"]
                    if not (isinstance(data__resources__spills, str) and data__resources__spills == 'forbid' or isinstance(data__resources__spills, str) and data__resources__spills == 'allow'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources.spills must be one of ['forbid', 'allow']")
                if data__resources_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".resources must not contain "+str(data__resources_keys)+" properties")
        if "size_domain" in data_keys:
            data_keys.remove("size_domain")
            data__sizedomain = data["size_domain"]
            if not isinstance(data__sizedomain, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain must be object")
            data__sizedomain_is_dict = isinstance(data__sizedomain, dict)
            if data__sizedomain_is_dict:
                data__sizedomain_len = len(data__sizedomain)
                if data__sizedomain_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain must contain at least 1 properties")
                data__sizedomain_keys = set(data__sizedomain.keys())
                for data__sizedomain_key in data__sizedomain_keys:
                    if data__sizedomain_key not in []:
                        data__sizedomain_value = data__sizedomain.get(data__sizedomain_key)
                        if not isinstance(data__sizedomain_value, (dict)):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}".format(**locals()) + " must be object")
                        data__sizedomain_value_is_dict = isinstance(data__sizedomain_value, dict)
                        if data__sizedomain_value_is_dict:
                            data__sizedomain_value__missing_keys = set(['min', 'max']) - data__sizedomain_value.keys()
                            if data__sizedomain_value__missing_keys:
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}".format(**locals()) + " must contain ")
                            data__sizedomain_value_keys = set(data__sizedomain_value.keys())
                            if "min" in data__sizedomain_value_keys:
                                data__sizedomain_value_keys.remove("min")
                                data__sizedomain_value__min = data__sizedomain_value["min"]
                                if not isinstance(data__sizedomain_value__min, (int)) or isinstance(data__sizedomain_value__min, bool):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.min".format(**locals()) + " must be integer")
                                if isinstance(data__sizedomain_value__min, (int, float, Decimal)) and not isinstance(data__sizedomain_value__min, bool):
                                    if data__sizedomain_value__min < 0:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.min".format(**locals()) + " must be bigger than or equal to 0")
                                    if data__sizedomain_value__min > 1099511627776:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.min".format(**locals()) + " must be smaller than or equal to 1099511627776")
                            if "max" in data__sizedomain_value_keys:
                                data__sizedomain_value_keys.remove("max")
                                data__sizedomain_value__max = data__sizedomain_value["max"]
                                if not isinstance(data__sizedomain_value__max, (int)) or isinstance(data__sizedomain_value__max, bool):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.max".format(**locals()) + " must be integer")
                                if isinstance(data__sizedomain_value__max, (int, float, Decimal)) and not isinstance(data__sizedomain_value__max, bool):
                                    if data__sizedomain_value__max < 0:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.max".format(**locals()) + " must be bigger than or equal to 0")
                                    if data__sizedomain_value__max > 1099511627776:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.max".format(**locals()) + " must be smaller than or equal to 1099511627776")
                            if "multiple_of" in data__sizedomain_value_keys:
                                data__sizedomain_value_keys.remove("multiple_of")
                                data__sizedomain_value__multipleof = data__sizedomain_value["multiple_of"]
                                if not isinstance(data__sizedomain_value__multipleof, (int)) or isinstance(data__sizedomain_value__multipleof, bool):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.multiple_of".format(**locals()) + " must be integer")
                                if isinstance(data__sizedomain_value__multipleof, (int, float, Decimal)) and not isinstance(data__sizedomain_value__multipleof, bool):
                                    if data__sizedomain_value__multipleof < 1:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.multiple_of".format(**locals()) + " must be bigger than or equal to 1")
                                    if data__sizedomain_value__multipleof > 1048576:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}.multiple_of".format(**locals()) + " must be smaller than or equal to 1048576")
                            if data__sizedomain_value_keys:
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_domain.{data__sizedomain_key}".format(**locals()) + " must not contain "+str(data__sizedomain_value_keys)+" properties")
        if "size_constraints" in data_keys:
            data_keys.remove("size_constraints")
            data__sizeconstraints = data["size_constraints"]
            if not isinstance(data__sizeconstraints, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_constraints must be array")
            data__sizeconstraints_is_list = isinstance(data__sizeconstraints, (list, tuple))
            if data__sizeconstraints_is_list:
                data__sizeconstraints_len = len(data__sizeconstraints)
                if data__sizeconstraints_len > 16:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_constraints must contain less than or equal to 16 items")
                for data__sizeconstraints_x, data__sizeconstraints_item in enumerate(data__sizeconstraints):
                    if not isinstance(data__sizeconstraints_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_constraints[{data__sizeconstraints_x}]".format(**locals()) + " must be string")
                    if isinstance(data__sizeconstraints_item, str):
                        if not REGEX_PATTERNS['^[A-Za-z0-9_+*/%(),\\s-]+(<=|>=|==|!=|<|>)[A-Za-z0-9_+*/%(),\\s-]+$'].search(data__sizeconstraints_item):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".size_constraints[{data__sizeconstraints_x}]".format(**locals()) + " must match pattern ^[A-Za-z0-9_+*/%(),\\s-]+(<=|>=|==|!=|<|>)[A-Za-z0-9_+*/%(),\\s-]+$")
        if "constants" in data_keys:
            data_keys.remove("constants")
            data__constants = data["constants"]
            if not isinstance(data__constants, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants must be array")
            data__constants_is_list = isinstance(data__constants, (list, tuple))
            if data__constants_is_list:
                data__constants_len = len(data__constants)
                if data__constants_len > 16:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants must contain less than or equal to 16 items")
                for data__constants_x, data__constants_item in enumerate(data__constants):
                    if not isinstance(data__constants_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}]".format(**locals()) + " must be object")
                    data__constants_item_is_dict = isinstance(data__constants_item, dict)
                    if data__constants_item_is_dict:
                        data__constants_item__missing_keys = set(['name', 'dtype']) - data__constants_item.keys()
                        if data__constants_item__missing_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}]".format(**locals()) + " must contain ")
                        data__constants_item_keys = set(data__constants_item.keys())
                        if "name" in data__constants_item_keys:
                            data__constants_item_keys.remove("name")
                            data__constants_item__name = data__constants_item["name"]
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__constants_item__name, custom_formats, (name_prefix or "data") + ".constants[{data__constants_x}].name".format(**locals()))
                        if "dtype" in data__constants_item_keys:
                            data__constants_item_keys.remove("dtype")
                            data__constants_item__dtype = data__constants_item["dtype"]
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dtype(data__constants_item__dtype, custom_formats, (name_prefix or "data") + ".constants[{data__constants_x}].dtype".format(**locals()))
                        if "values" in data__constants_item_keys:
                            data__constants_item_keys.remove("values")
                            data__constants_item__values = data__constants_item["values"]
                            if not isinstance(data__constants_item__values, (list, tuple)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}].values".format(**locals()) + " must be array")
                            data__constants_item__values_is_list = isinstance(data__constants_item__values, (list, tuple))
                            if data__constants_item__values_is_list:
                                data__constants_item__values_len = len(data__constants_item__values)
                                if data__constants_item__values_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}].values".format(**locals()) + " must contain at least 1 items")
                                for data__constants_item__values_x, data__constants_item__values_item in enumerate(data__constants_item__values):
                                    if not isinstance(data__constants_item__values_item, (int, float, Decimal)) or isinstance(data__constants_item__values_item, bool):
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}].values[{data__constants_item__values_x}]".format(**locals()) + " must be number")
                        if "count" in data__constants_item_keys:
                            data__constants_item_keys.remove("count")
                            data__constants_item__count = data__constants_item["count"]
                            if not isinstance(data__constants_item__count, (int)) or isinstance(data__constants_item__count, bool):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}].count".format(**locals()) + " must be integer")
                            if isinstance(data__constants_item__count, (int, float, Decimal)) and not isinstance(data__constants_item__count, bool):
                                if data__constants_item__count < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}].count".format(**locals()) + " must be bigger than or equal to 1")
                        if "range" in data__constants_item_keys:
                            data__constants_item_keys.remove("range")
                            data__constants_item__range = data__constants_item["range"]
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_range(data__constants_item__range, custom_formats, (name_prefix or "data") + ".constants[{data__constants_x}].range".format(**locals()))
                        if data__constants_item_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".constants[{data__constants_x}]".format(**locals()) + " must not contain "+str(data__constants_item_keys)+" properties")
        if "preconditions" in data_keys:
            data_keys.remove("preconditions")
            data__preconditions = data["preconditions"]
            if not isinstance(data__preconditions, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".preconditions must be array")
            data__preconditions_is_list = isinstance(data__preconditions, (list, tuple))
            if data__preconditions_is_list:
                data__preconditions_len = len(data__preconditions)
                if data__preconditions_len > 16:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".preconditions must contain less than or equal to 16 items")
                for data__preconditions_x, data__preconditions_item in enumerate(data__preconditions):
                    if not isinstance(data__preconditions_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".preconditions[{data__preconditions_x}]".format(**locals()) + " must be string")
                    if isinstance(data__preconditions_item, str):
                        data__preconditions_item_len = len(data__preconditions_item)
                        if data__preconditions_item_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".preconditions[{data__preconditions_x}]".format(**locals()) + " must be longer than or equal to 1 characters")
        if "waivers" in data_keys:
            data_keys.remove("waivers")
            data__waivers = data["waivers"]
            if not isinstance(data__waivers, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers must be array")
            data__waivers_is_list = isinstance(data__waivers, (list, tuple))
            if data__waivers_is_list:
                data__waivers_len = len(data__waivers)
                if data__waivers_len > 32:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers must contain less than or equal to 32 items")
                for data__waivers_x, data__waivers_item in enumerate(data__waivers):
                    if not isinstance(data__waivers_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must be object")
                    data__waivers_item_one_of_count2 = 0
                    if data__waivers_item_one_of_count2 < 2:
                        try:
                            data__waivers_item_is_dict = isinstance(data__waivers_item, dict)
                            if data__waivers_item_is_dict:
                                data__waivers_item__missing_keys = set(['line']) - data__waivers_item.keys()
                                if data__waivers_item__missing_keys:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must contain ")
                            data__waivers_item_one_of_count2 += 1
                        except (JsonSchemaValueException, JsonSchemaValuesException): pass
                    if data__waivers_item_one_of_count2 < 2:
                        try:
                            data__waivers_item_is_dict = isinstance(data__waivers_item, dict)
                            if data__waivers_item_is_dict:
                                data__waivers_item__missing_keys = set(['label']) - data__waivers_item.keys()
                                if data__waivers_item__missing_keys:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must contain ")
                            data__waivers_item_one_of_count2 += 1
                        except (JsonSchemaValueException, JsonSchemaValuesException): pass
                    if data__waivers_item_one_of_count2 != 1:
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must be valid exactly by one definition")
                    data__waivers_item_is_dict = isinstance(data__waivers_item, dict)
                    if data__waivers_item_is_dict:
                        data__waivers_item__missing_keys = set(['finding', 'entry', 'reason']) - data__waivers_item.keys()
                        if data__waivers_item__missing_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must contain ")
                        data__waivers_item_keys = set(data__waivers_item.keys())
                        if "finding" in data__waivers_item_keys:
                            data__waivers_item_keys.remove("finding")
                            data__waivers_item__finding = data__waivers_item["finding"]
                            if not (isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'out_of_bounds' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'race' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'divergent_barrier' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'partial_barrier' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'uninitialised_read' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'unwritten' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'double_write' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'step_limit' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'misaligned' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'undefined_register' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'shuffle_undefined_lane' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'global_race' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'cp_async_in_flight' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'schedule_dependent' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'assert_failed' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'division_by_zero' or isinstance(data__waivers_item__finding, str) and data__waivers_item__finding == 'stale_module_state'):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].finding".format(**locals()) + " must be one of ['out_of_bounds', 'race', 'divergent_barrier', 'partial_barrier', 'uninitialised_read', 'unwritten', 'double_write', 'step_limit', 'misaligned', 'undefined_register', 'shuffle_undefined_lane', 'global_race', 'cp_async_in_flight', 'schedule_dependent', 'assert_failed', 'division_by_zero', 'stale_module_state']")
                        if "entry" in data__waivers_item_keys:
                            data__waivers_item_keys.remove("entry")
                            data__waivers_item__entry = data__waivers_item["entry"]
                            if not isinstance(data__waivers_item__entry, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].entry".format(**locals()) + " must be string")
                            if isinstance(data__waivers_item__entry, str):
                                data__waivers_item__entry_len = len(data__waivers_item__entry)
                                if data__waivers_item__entry_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].entry".format(**locals()) + " must be longer than or equal to 1 characters")
                        if "line" in data__waivers_item_keys:
                            data__waivers_item_keys.remove("line")
                            data__waivers_item__line = data__waivers_item["line"]
                            if not isinstance(data__waivers_item__line, (int)) or isinstance(data__waivers_item__line, bool):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].line".format(**locals()) + " must be integer")
                            if isinstance(data__waivers_item__line, (int, float, Decimal)) and not isinstance(data__waivers_item__line, bool):
                                if data__waivers_item__line < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].line".format(**locals()) + " must be bigger than or equal to 1")
                                if data__waivers_item__line > 16777216:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].line".format(**locals()) + " must be smaller than or equal to 16777216")
                        if "label" in data__waivers_item_keys:
                            data__waivers_item_keys.remove("label")
                            data__waivers_item__label = data__waivers_item["label"]
                            if not isinstance(data__waivers_item__label, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].label".format(**locals()) + " must be string")
                            if isinstance(data__waivers_item__label, str):
                                data__waivers_item__label_len = len(data__waivers_item__label)
                                if data__waivers_item__label_len < 1:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].label".format(**locals()) + " must be longer than or equal to 1 characters")
                        if "reason" in data__waivers_item_keys:
                            data__waivers_item_keys.remove("reason")
                            data__waivers_item__reason = data__waivers_item["reason"]
                            if not isinstance(data__waivers_item__reason, (str)):
                                raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].reason".format(**locals()) + " must be string")
                            if isinstance(data__waivers_item__reason, str):
                                data__waivers_item__reason_len = len(data__waivers_item__reason)
                                if data__waivers_item__reason_len < 10:
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}].reason".format(**locals()) + " must be longer than or equal to 10 characters")
                        if data__waivers_item_keys:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".waivers[{data__waivers_x}]".format(**locals()) + " must not contain "+str(data__waivers_item_keys)+" properties")
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_range(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['low', 'high']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
        data_keys = set(data.keys())
        if "low" in data_keys:
            data_keys.remove("low")
            data__low = data["low"]
            if not isinstance(data__low, (int, float, Decimal)) or isinstance(data__low, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".low must be number")
        if "high" in data_keys:
            data_keys.remove("high")
            data__high = data["high"]
            if not isinstance(data__high, (int, float, Decimal)) or isinstance(data__high, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".high must be number")
        if data_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dtype(data, custom_formats={}, name_prefix=None):
    if not (isinstance(data, str) and data == 'f16' or isinstance(data, str) and data == 'bf16' or isinstance(data, str) and data == 'f32' or isinstance(data, str) and data == 'f64' or isinstance(data, str) and data == 's32' or isinstance(data, str) and data == 'u32' or isinstance(data, str) and data == 's64' or isinstance(data, str) and data == 'u64' or isinstance(data, str) and data == 'u8' or isinstance(data, str) and data == 's8'):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be one of ['f16', 'bf16', 'f32', 'f64', 's32', 'u32', 's64', 'u64', 'u8', 's8']")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (str, int)) or isinstance(data, bool):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be string or integer")
    if isinstance(data, str):
        if not REGEX_PATTERNS['^[A-Za-z0-9_+*/%(),\\s-]+$'].search(data):
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must match pattern ^[A-Za-z0-9_+*/%(),\\s-]+$")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dim3(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (list, tuple)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be array")
    data_is_list = isinstance(data, (list, tuple))
    if data_is_list:
        data_len = len(data)
        if data_len < 3:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain at least 3 items")
        if data_len > 3:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain less than or equal to 3 items")
        for data_x, data_item in enumerate(data):
            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data_item, custom_formats, (name_prefix or "data") + "[{data_x}]".format(**locals()))
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_param(data, custom_formats={}, name_prefix=None):
    data_one_of_count3 = 0
    if data_one_of_count3 < 2:
        try:
            if not isinstance(data, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
            data_is_dict = isinstance(data, dict)
            if data_is_dict:
                data__missing_keys = set(['name', 'ptr', 'shape']) - data.keys()
                if data__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
                data_keys = set(data.keys())
                if "name" in data_keys:
                    data_keys.remove("name")
                    data__name = data["name"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__name, custom_formats, (name_prefix or "data") + ".name")
                if "ptr" in data_keys:
                    data_keys.remove("ptr")
                    data__ptr = data["ptr"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dtype(data__ptr, custom_formats, (name_prefix or "data") + ".ptr")
                if "intent" in data_keys:
                    data_keys.remove("intent")
                    data__intent = data["intent"]
                    if not (isinstance(data__intent, str) and data__intent == 'in' or isinstance(data__intent, str) and data__intent == 'out' or isinstance(data__intent, str) and data__intent == 'inout'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".intent must be one of ['in', 'out', 'inout']")
                if "shape" in data_keys:
                    data_keys.remove("shape")
                    data__shape = data["shape"]
                    if not isinstance(data__shape, (list, tuple)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".shape must be array")
                    data__shape_is_list = isinstance(data__shape, (list, tuple))
                    if data__shape_is_list:
                        data__shape_len = len(data__shape)
                        if data__shape_len < 1:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".shape must contain at least 1 items")
                        for data__shape_x, data__shape_item in enumerate(data__shape):
                            validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data__shape_item, custom_formats, (name_prefix or "data") + ".shape[{data__shape_x}]".format(**locals()))
                if "range" in data_keys:
                    data_keys.remove("range")
                    data__range = data["range"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_range(data__range, custom_formats, (name_prefix or "data") + ".range")
                if "distribution" in data_keys:
                    data_keys.remove("distribution")
                    data__distribution = data["distribution"]
                    if not (isinstance(data__distribution, str) and data__distribution == 'uniform' or isinstance(data__distribution, str) and data__distribution == 'normal'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".distribution must be one of ['uniform', 'normal']")
                if "index_of" in data_keys:
                    data_keys.remove("index_of")
                    data__indexof = data["index_of"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data__indexof, custom_formats, (name_prefix or "data") + ".index_of")
                if "sorted" in data_keys:
                    data_keys.remove("sorted")
                    data__sorted = data["sorted"]
                    if not isinstance(data__sorted, (bool)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".sorted must be boolean")
                if "unique" in data_keys:
                    data_keys.remove("unique")
                    data__unique = data["unique"]
                    if not isinstance(data__unique, (bool)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".unique must be boolean")
                if "permutation" in data_keys:
                    data_keys.remove("permutation")
                    data__permutation = data["permutation"]
                    if not isinstance(data__permutation, (bool)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".permutation must be boolean")
                if "offsets_of" in data_keys:
                    data_keys.remove("offsets_of")
                    data__offsetsof = data["offsets_of"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__offsetsof, custom_formats, (name_prefix or "data") + ".offsets_of")
                if "total" in data_keys:
                    data_keys.remove("total")
                    data__total = data["total"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_expr(data__total, custom_formats, (name_prefix or "data") + ".total")
                if "nullable" in data_keys:
                    data_keys.remove("nullable")
                    data__nullable = data["nullable"]
                    if not isinstance(data__nullable, (bool)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".nullable must be boolean")
                if data_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties")
            data_one_of_count3 += 1
        except (JsonSchemaValueException, JsonSchemaValuesException): pass
    if data_one_of_count3 < 2:
        try:
            if not isinstance(data, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
            data_is_dict = isinstance(data, dict)
            if data_is_dict:
                data__missing_keys = set(['name', 'scalar']) - data.keys()
                if data__missing_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
                data_keys = set(data.keys())
                if "name" in data_keys:
                    data_keys.remove("name")
                    data__name = data["name"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data__name, custom_formats, (name_prefix or "data") + ".name")
                if "scalar" in data_keys:
                    data_keys.remove("scalar")
                    data__scalar = data["scalar"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_dtype(data__scalar, custom_formats, (name_prefix or "data") + ".scalar")
                if "value" in data_keys:
                    data_keys.remove("value")
                    data__value = data["value"]
                    if not isinstance(data__value, (str, int, float, Decimal)) or isinstance(data__value, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".value must be string or number")
                    if isinstance(data__value, str):
                        if not REGEX_PATTERNS['^[A-Za-z0-9_+*/%(),\\s-]+$'].search(data__value):
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".value must match pattern ^[A-Za-z0-9_+*/%(),\\s-]+$")
                if "tied" in data_keys:
                    data_keys.remove("tied")
                    data__tied = data["tied"]
                    if not (isinstance(data__tied, str) and data__tied == 'grid.x' or isinstance(data__tied, str) and data__tied == 'grid.y' or isinstance(data__tied, str) and data__tied == 'grid.z' or isinstance(data__tied, str) and data__tied == 'block.x' or isinstance(data__tied, str) and data__tied == 'block.y' or isinstance(data__tied, str) and data__tied == 'block.z' or isinstance(data__tied, str) and data__tied == 'shared_bytes'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tied must be one of ['grid.x', 'grid.y', 'grid.z', 'block.x', 'block.y', 'block.z', 'shared_bytes']")
                if "range" in data_keys:
                    data_keys.remove("range")
                    data__range = data["range"]
                    validate_https___kernel_ledger_invalid_contract_schema_json__definitions_range(data__range, custom_formats, (name_prefix or "data") + ".range")
                if "distribution" in data_keys:
                    data_keys.remove("distribution")
                    data__distribution = data["distribution"]
                    if not (isinstance(data__distribution, str) and data__distribution == 'uniform' or isinstance(data__distribution, str) and data__distribution == 'normal'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".distribution must be one of ['uniform', 'normal']")
                if data_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + " must not contain "+str(data_keys)+" properties")
            data_one_of_count3 += 1
        except (JsonSchemaValueException, JsonSchemaValuesException): pass
    if data_one_of_count3 != 1:
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be valid exactly by one definition")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_name(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (str)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be string")
    if isinstance(data, str):
        if not REGEX_PATTERNS['^[A-Za-z_][A-Za-z0-9_]*$'].search(data):
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must match pattern ^[A-Za-z_][A-Za-z0-9_]*$")
    return data

def validate_https___kernel_ledger_invalid_contract_schema_json__definitions_falsification_test(data, custom_formats={}, name_prefix=None):
    if not isinstance(data, (dict)):
        raise JsonSchemaValueException("" + (name_prefix or "data") + " must be object")
    data_is_dict = isinstance(data, dict)
    if data_is_dict:
        data__missing_keys = set(['id']) - data.keys()
        if data__missing_keys:
            raise JsonSchemaValueException("" + (name_prefix or "data") + " must contain ")
        if "sizes" in data:
            if "tolerance" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency tolerance for sizes")
            if "properties" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency properties for sizes")
        if "tolerance" in data:
            if "sizes" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency sizes for tolerance")
            if "properties" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency properties for tolerance")
        if "properties" in data:
            if "sizes" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency sizes for properties")
            if "tolerance" not in data:
                raise JsonSchemaValueException("" + (name_prefix or "data") + " missing dependency tolerance for properties")
        data_keys = set(data.keys())
        if "id" in data_keys:
            data_keys.remove("id")
            data__id = data["id"]
            if not isinstance(data__id, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be string")
            if isinstance(data__id, str):
                data__id_len = len(data__id)
                if data__id_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".id must be longer than or equal to 1 characters")
        if "rule" in data_keys:
            data_keys.remove("rule")
            data__rule = data["rule"]
            if not isinstance(data__rule, (str, int, float, Decimal)) or isinstance(data__rule, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".rule must be string or number")
        if "prediction" in data_keys:
            data_keys.remove("prediction")
            data__prediction = data["prediction"]
            if not isinstance(data__prediction, (str, int, float, Decimal)) or isinstance(data__prediction, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".prediction must be string or number")
        if "test" in data_keys:
            data_keys.remove("test")
            data__test = data["test"]
            if not isinstance(data__test, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".test must be string")
        if "if_fails" in data_keys:
            data_keys.remove("if_fails")
            data__iffails = data["if_fails"]
            if not isinstance(data__iffails, (str)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".if_fails must be string")
        if "sizes" in data_keys:
            data_keys.remove("sizes")
            data__sizes = data["sizes"]
            if not isinstance(data__sizes, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".sizes must be array")
            data__sizes_is_list = isinstance(data__sizes, (list, tuple))
            if data__sizes_is_list:
                data__sizes_len = len(data__sizes)
                if data__sizes_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".sizes must contain at least 1 items")
                for data__sizes_x, data__sizes_item in enumerate(data__sizes):
                    if not isinstance(data__sizes_item, (dict)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".sizes[{data__sizes_x}]".format(**locals()) + " must be object")
                    data__sizes_item_is_dict = isinstance(data__sizes_item, dict)
                    if data__sizes_item_is_dict:
                        data__sizes_item_keys = set(data__sizes_item.keys())
                        for data__sizes_item_key in data__sizes_item_keys:
                            if data__sizes_item_key not in []:
                                data__sizes_item_value = data__sizes_item.get(data__sizes_item_key)
                                if not isinstance(data__sizes_item_value, (int)) or isinstance(data__sizes_item_value, bool):
                                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".sizes[{data__sizes_x}].{data__sizes_item_key}".format(**locals()) + " must be integer")
                                if isinstance(data__sizes_item_value, (int, float, Decimal)) and not isinstance(data__sizes_item_value, bool):
                                    if data__sizes_item_value < 0:
                                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".sizes[{data__sizes_x}].{data__sizes_item_key}".format(**locals()) + " must be bigger than or equal to 0")
        if "seed" in data_keys:
            data_keys.remove("seed")
            data__seed = data["seed"]
            if not isinstance(data__seed, (int)) or isinstance(data__seed, bool):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".seed must be integer")
            if isinstance(data__seed, (int, float, Decimal)) and not isinstance(data__seed, bool):
                if data__seed < 0:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".seed must be bigger than or equal to 0")
        if "inputs" in data_keys:
            data_keys.remove("inputs")
            data__inputs = data["inputs"]
            if not isinstance(data__inputs, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".inputs must be object")
            data__inputs_is_dict = isinstance(data__inputs, dict)
            if data__inputs_is_dict:
                data__inputs_keys = set(data__inputs.keys())
                if "low" in data__inputs_keys:
                    data__inputs_keys.remove("low")
                    data__inputs__low = data__inputs["low"]
                    if not isinstance(data__inputs__low, (int, float, Decimal)) or isinstance(data__inputs__low, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".inputs.low must be number")
                if "high" in data__inputs_keys:
                    data__inputs_keys.remove("high")
                    data__inputs__high = data__inputs["high"]
                    if not isinstance(data__inputs__high, (int, float, Decimal)) or isinstance(data__inputs__high, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".inputs.high must be number")
                if data__inputs_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".inputs must not contain "+str(data__inputs_keys)+" properties")
        if "tolerance" in data_keys:
            data_keys.remove("tolerance")
            data__tolerance = data["tolerance"]
            if not isinstance(data__tolerance, (dict)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance must be object")
            data__tolerance_is_dict = isinstance(data__tolerance, dict)
            if data__tolerance_is_dict:
                data__tolerance_len = len(data__tolerance)
                if data__tolerance_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance must contain at least 1 properties")
                data__tolerance_keys = set(data__tolerance.keys())
                if "ulp" in data__tolerance_keys:
                    data__tolerance_keys.remove("ulp")
                    data__tolerance__ulp = data__tolerance["ulp"]
                    if not isinstance(data__tolerance__ulp, (int, float, Decimal)) or isinstance(data__tolerance__ulp, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.ulp must be number")
                    if isinstance(data__tolerance__ulp, (int, float, Decimal)) and not isinstance(data__tolerance__ulp, bool):
                        if data__tolerance__ulp < 0:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.ulp must be bigger than or equal to 0")
                if "rel" in data__tolerance_keys:
                    data__tolerance_keys.remove("rel")
                    data__tolerance__rel = data__tolerance["rel"]
                    if not isinstance(data__tolerance__rel, (int, float, Decimal)) or isinstance(data__tolerance__rel, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.rel must be number")
                    if isinstance(data__tolerance__rel, (int, float, Decimal)) and not isinstance(data__tolerance__rel, bool):
                        if data__tolerance__rel < 0:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.rel must be bigger than or equal to 0")
                if "abs" in data__tolerance_keys:
                    data__tolerance_keys.remove("abs")
                    data__tolerance__abs = data__tolerance["abs"]
                    if not isinstance(data__tolerance__abs, (int, float, Decimal)) or isinstance(data__tolerance__abs, bool):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.abs must be number")
                    if isinstance(data__tolerance__abs, (int, float, Decimal)) and not isinstance(data__tolerance__abs, bool):
                        if data__tolerance__abs < 0:
                            raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.abs must be bigger than or equal to 0")
                if "why" in data__tolerance_keys:
                    data__tolerance_keys.remove("why")
                    data__tolerance__why = data__tolerance["why"]
                    if not isinstance(data__tolerance__why, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance.why must be string")
                if data__tolerance_keys:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".tolerance must not contain "+str(data__tolerance_keys)+" properties")
        if "properties" in data_keys:
            data_keys.remove("properties")
            data__properties = data["properties"]
            if not isinstance(data__properties, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".properties must be array")
            data__properties_is_list = isinstance(data__properties, (list, tuple))
            if data__properties_is_list:
                data__properties_len = len(data__properties)
                if data__properties_len < 1:
                    raise JsonSchemaValueException("" + (name_prefix or "data") + ".properties must contain at least 1 items")
                for data__properties_x, data__properties_item in enumerate(data__properties):
                    if not isinstance(data__properties_item, (str)):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".properties[{data__properties_x}]".format(**locals()) + " must be string")
        if "specials" in data_keys:
            data_keys.remove("specials")
            data__specials = data["specials"]
            if not isinstance(data__specials, (list, tuple)):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".specials must be array")
            data__specials_is_list = isinstance(data__specials, (list, tuple))
            if data__specials_is_list:
                data__specials_len = len(data__specials)
                for data__specials_x, data__specials_item in enumerate(data__specials):
                    if not (isinstance(data__specials_item, str) and data__specials_item == 'nan' or isinstance(data__specials_item, str) and data__specials_item == 'inf'):
                        raise JsonSchemaValueException("" + (name_prefix or "data") + ".specials[{data__specials_x}]".format(**locals()) + " must be one of ['nan', 'inf']")
        if "nan" in data_keys:
            data_keys.remove("nan")
            data__nan = data["nan"]
            if not (isinstance(data__nan, str) and data__nan == 'equal' or isinstance(data__nan, str) and data__nan == 'any'):
                raise JsonSchemaValueException("" + (name_prefix or "data") + ".nan must be one of ['equal', 'any']")
    return data


validate = validate_https___kernel_ledger_invalid_contract_schema_json

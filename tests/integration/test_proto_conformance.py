"""Wire conformance of proto/*.proto with Triton's published protos.

The tables below are facts copied from triton-inference-server/common
(protobuf/grpc_service.proto and protobuf/model_config.proto, package
`inference`) and from grpc/grpc's src/proto/grpc/health/v1/health.proto
(`grpc.health.v1`; Triton's protobuf/health.proto is the same without
Watch). They are written here, not downloaded, so this test runs offline
and fails on any drift of what inferd declares: every message, map entry,
field (number, type, label, oneof), enum value and RPC that inferd's .proto
files declare must be in these tables and agree with them. Messages and
fields that inferd leaves out (shared memory, fields of ModelConfig it does
not use) are simply absent from inferd's side.

A field is (number, type, label, oneof): type is the descriptor type in
lower case, with the referenced message or enum after a colon; label is
optional/repeated (proto3 singular fields are "optional" in descriptors);
oneof is the name of the containing oneof or None. Map fields appear as
their generated `...Entry` messages (key = 1, value = 2).
"""
import subprocess

import pytest
from google.protobuf import descriptor as D
from google.protobuf import descriptor_pb2, descriptor_pool

from grpc_client import generate

# ---- Triton's facts ------------------------------------------------------------

MESSAGES = {
    'grpc.health.v1.HealthCheckRequest': {
        'service': (1, 'string', 'optional', None),
    },
    'grpc.health.v1.HealthCheckResponse': {
        'status': (1, 'enum:.grpc.health.v1.HealthCheckResponse.ServingStatus', 'optional', None),
    },
    'inference.InferBatchStatistics': {
        'batch_size': (1, 'uint64', 'optional', None),
        'compute_input': (2, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_infer': (3, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_output': (4, 'message:.inference.StatisticDuration', 'optional', None),
    },
    'inference.InferParameter': {
        'bool_param': (1, 'bool', 'optional', 'parameter_choice'),
        'int64_param': (2, 'int64', 'optional', 'parameter_choice'),
        'string_param': (3, 'string', 'optional', 'parameter_choice'),
        'double_param': (4, 'double', 'optional', 'parameter_choice'),
        'uint64_param': (5, 'uint64', 'optional', 'parameter_choice'),
    },
    'inference.InferResponseStatistics': {
        'compute_infer': (1, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_output': (2, 'message:.inference.StatisticDuration', 'optional', None),
        'success': (3, 'message:.inference.StatisticDuration', 'optional', None),
        'fail': (4, 'message:.inference.StatisticDuration', 'optional', None),
        'empty_response': (5, 'message:.inference.StatisticDuration', 'optional', None),
        'cancel': (6, 'message:.inference.StatisticDuration', 'optional', None),
    },
    'inference.InferStatistics': {
        'success': (1, 'message:.inference.StatisticDuration', 'optional', None),
        'fail': (2, 'message:.inference.StatisticDuration', 'optional', None),
        'queue': (3, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_input': (4, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_infer': (5, 'message:.inference.StatisticDuration', 'optional', None),
        'compute_output': (6, 'message:.inference.StatisticDuration', 'optional', None),
        'cache_hit': (7, 'message:.inference.StatisticDuration', 'optional', None),
        'cache_miss': (8, 'message:.inference.StatisticDuration', 'optional', None),
    },
    'inference.InferTensorContents': {
        'bool_contents': (1, 'bool', 'repeated', None),
        'int_contents': (2, 'int32', 'repeated', None),
        'int64_contents': (3, 'int64', 'repeated', None),
        'uint_contents': (4, 'uint32', 'repeated', None),
        'uint64_contents': (5, 'uint64', 'repeated', None),
        'fp32_contents': (6, 'float', 'repeated', None),
        'fp64_contents': (7, 'double', 'repeated', None),
        'bytes_contents': (8, 'bytes', 'repeated', None),
    },
    'inference.LogSettingsRequest': {
        'settings': (1, 'message:.inference.LogSettingsRequest.SettingsEntry', 'repeated', None),
    },
    'inference.LogSettingsRequest.SettingValue': {
        'bool_param': (1, 'bool', 'optional', 'parameter_choice'),
        'uint32_param': (2, 'uint32', 'optional', 'parameter_choice'),
        'string_param': (3, 'string', 'optional', 'parameter_choice'),
    },
    'inference.LogSettingsRequest.SettingsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.LogSettingsRequest.SettingValue', 'optional', None),
    },
    'inference.LogSettingsResponse': {
        'settings': (1, 'message:.inference.LogSettingsResponse.SettingsEntry', 'repeated', None),
    },
    'inference.LogSettingsResponse.SettingValue': {
        'bool_param': (1, 'bool', 'optional', 'parameter_choice'),
        'uint32_param': (2, 'uint32', 'optional', 'parameter_choice'),
        'string_param': (3, 'string', 'optional', 'parameter_choice'),
    },
    'inference.LogSettingsResponse.SettingsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.LogSettingsResponse.SettingValue', 'optional', None),
    },
    'inference.MemoryUsage': {
        'type': (1, 'string', 'optional', None),
        'id': (2, 'int64', 'optional', None),
        'byte_size': (3, 'uint64', 'optional', None),
    },
    'inference.ModelConfig': {
        'name': (1, 'string', 'optional', None),
        'platform': (2, 'string', 'optional', None),
        'backend': (17, 'string', 'optional', None),
        'runtime': (25, 'string', 'optional', None),
        'version_policy': (3, 'message:.inference.ModelVersionPolicy', 'optional', None),
        'max_batch_size': (4, 'int32', 'optional', None),
        'input': (5, 'message:.inference.ModelInput', 'repeated', None),
        'output': (6, 'message:.inference.ModelOutput', 'repeated', None),
        'batch_input': (20, 'message:.inference.BatchInput', 'repeated', None),
        'batch_output': (21, 'message:.inference.BatchOutput', 'repeated', None),
        'optimization': (12, 'message:.inference.ModelOptimizationPolicy', 'optional', None),
        'dynamic_batching': (11, 'message:.inference.ModelDynamicBatching', 'optional', 'scheduling_choice'),
        'sequence_batching': (13, 'message:.inference.ModelSequenceBatching', 'optional', 'scheduling_choice'),
        'ensemble_scheduling': (15, 'message:.inference.ModelEnsembling', 'optional', 'scheduling_choice'),
        'instance_group': (7, 'message:.inference.ModelInstanceGroup', 'repeated', None),
        'default_model_filename': (8, 'string', 'optional', None),
        'cc_model_filenames': (9, 'message:.inference.ModelConfig.CcModelFilenamesEntry', 'repeated', None),
        'metric_tags': (10, 'message:.inference.ModelConfig.MetricTagsEntry', 'repeated', None),
        'parameters': (14, 'message:.inference.ModelConfig.ParametersEntry', 'repeated', None),
        'model_warmup': (16, 'message:.inference.ModelWarmup', 'repeated', None),
        'model_operations': (18, 'message:.inference.ModelOperations', 'optional', None),
        'model_transaction_policy': (19, 'message:.inference.ModelTransactionPolicy', 'optional', None),
        'model_repository_agents': (23, 'message:.inference.ModelRepositoryAgents', 'optional', None),
        'response_cache': (24, 'message:.inference.ModelResponseCache', 'optional', None),
        'model_metrics': (26, 'message:.inference.ModelMetrics', 'optional', None),
    },
    'inference.ModelConfig.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.ModelParameter', 'optional', None),
    },
    'inference.ModelConfigRequest': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
    },
    'inference.ModelConfigResponse': {
        'config': (1, 'message:.inference.ModelConfig', 'optional', None),
    },
    'inference.ModelDynamicBatching': {
        'preferred_batch_size': (1, 'int32', 'repeated', None),
        'max_queue_delay_microseconds': (2, 'uint64', 'optional', None),
        'preserve_ordering': (3, 'bool', 'optional', None),
        'priority_levels': (4, 'uint64', 'optional', None),
        'default_priority_level': (5, 'uint64', 'optional', None),
        'default_queue_policy': (6, 'message:.inference.ModelQueuePolicy', 'optional', None),
        'priority_queue_policy': (7, 'message:.inference.ModelDynamicBatching.PriorityQueuePolicyEntry', 'repeated', None),
    },
    'inference.ModelDynamicBatching.PriorityQueuePolicyEntry': {
        'key': (1, 'uint64', 'optional', None),
        'value': (2, 'message:.inference.ModelQueuePolicy', 'optional', None),
    },
    'inference.ModelInferRequest': {
        'model_name': (1, 'string', 'optional', None),
        'model_version': (2, 'string', 'optional', None),
        'id': (3, 'string', 'optional', None),
        'parameters': (4, 'message:.inference.ModelInferRequest.ParametersEntry', 'repeated', None),
        'inputs': (5, 'message:.inference.ModelInferRequest.InferInputTensor', 'repeated', None),
        'outputs': (6, 'message:.inference.ModelInferRequest.InferRequestedOutputTensor', 'repeated', None),
        'raw_input_contents': (7, 'bytes', 'repeated', None),
    },
    'inference.ModelInferRequest.InferInputTensor': {
        'name': (1, 'string', 'optional', None),
        'datatype': (2, 'string', 'optional', None),
        'shape': (3, 'int64', 'repeated', None),
        'parameters': (4, 'message:.inference.ModelInferRequest.InferInputTensor.ParametersEntry', 'repeated', None),
        'contents': (5, 'message:.inference.InferTensorContents', 'optional', None),
    },
    'inference.ModelInferRequest.InferInputTensor.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferParameter', 'optional', None),
    },
    'inference.ModelInferRequest.InferRequestedOutputTensor': {
        'name': (1, 'string', 'optional', None),
        'parameters': (2, 'message:.inference.ModelInferRequest.InferRequestedOutputTensor.ParametersEntry', 'repeated', None),
    },
    'inference.ModelInferRequest.InferRequestedOutputTensor.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferParameter', 'optional', None),
    },
    'inference.ModelInferRequest.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferParameter', 'optional', None),
    },
    'inference.ModelInferResponse': {
        'model_name': (1, 'string', 'optional', None),
        'model_version': (2, 'string', 'optional', None),
        'id': (3, 'string', 'optional', None),
        'parameters': (4, 'message:.inference.ModelInferResponse.ParametersEntry', 'repeated', None),
        'outputs': (5, 'message:.inference.ModelInferResponse.InferOutputTensor', 'repeated', None),
        'raw_output_contents': (6, 'bytes', 'repeated', None),
    },
    'inference.ModelInferResponse.InferOutputTensor': {
        'name': (1, 'string', 'optional', None),
        'datatype': (2, 'string', 'optional', None),
        'shape': (3, 'int64', 'repeated', None),
        'parameters': (4, 'message:.inference.ModelInferResponse.InferOutputTensor.ParametersEntry', 'repeated', None),
        'contents': (5, 'message:.inference.InferTensorContents', 'optional', None),
    },
    'inference.ModelInferResponse.InferOutputTensor.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferParameter', 'optional', None),
    },
    'inference.ModelInferResponse.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferParameter', 'optional', None),
    },
    'inference.ModelInput': {
        'name': (1, 'string', 'optional', None),
        'data_type': (2, 'enum:.inference.DataType', 'optional', None),
        'format': (3, 'enum:.inference.ModelInput.Format', 'optional', None),
        'dims': (4, 'int64', 'repeated', None),
        'reshape': (5, 'message:.inference.ModelTensorReshape', 'optional', None),
        'is_shape_tensor': (6, 'bool', 'optional', None),
        'allow_ragged_batch': (7, 'bool', 'optional', None),
        'optional': (8, 'bool', 'optional', None),
        'is_non_linear_format_io': (9, 'bool', 'optional', None),
    },
    'inference.ModelInstanceGroup': {
        'name': (1, 'string', 'optional', None),
        'kind': (4, 'enum:.inference.ModelInstanceGroup.Kind', 'optional', None),
        'count': (2, 'int32', 'optional', None),
        'rate_limiter': (6, 'message:.inference.ModelRateLimiter', 'optional', None),
        'gpus': (3, 'int32', 'repeated', None),
        'secondary_devices': (8, 'message:.inference.ModelInstanceGroup.SecondaryDevice', 'repeated', None),
        'profile': (5, 'string', 'repeated', None),
        'passive': (7, 'bool', 'optional', None),
        'host_policy': (9, 'string', 'optional', None),
    },
    'inference.ModelMetadataRequest': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
    },
    'inference.ModelMetadataResponse': {
        'name': (1, 'string', 'optional', None),
        'versions': (2, 'string', 'repeated', None),
        'platform': (3, 'string', 'optional', None),
        'inputs': (4, 'message:.inference.ModelMetadataResponse.TensorMetadata', 'repeated', None),
        'outputs': (5, 'message:.inference.ModelMetadataResponse.TensorMetadata', 'repeated', None),
    },
    'inference.ModelMetadataResponse.TensorMetadata': {
        'name': (1, 'string', 'optional', None),
        'datatype': (2, 'string', 'optional', None),
        'shape': (3, 'int64', 'repeated', None),
    },
    'inference.ModelOutput': {
        'name': (1, 'string', 'optional', None),
        'data_type': (2, 'enum:.inference.DataType', 'optional', None),
        'dims': (3, 'int64', 'repeated', None),
        'reshape': (5, 'message:.inference.ModelTensorReshape', 'optional', None),
        'label_filename': (4, 'string', 'optional', None),
        'is_shape_tensor': (6, 'bool', 'optional', None),
        'is_non_linear_format_io': (7, 'bool', 'optional', None),
    },
    'inference.ModelParameter': {
        'string_value': (1, 'string', 'optional', None),
    },
    'inference.ModelQueuePolicy': {
        'timeout_action': (1, 'enum:.inference.ModelQueuePolicy.TimeoutAction', 'optional', None),
        'default_timeout_microseconds': (2, 'uint64', 'optional', None),
        'allow_timeout_override': (3, 'bool', 'optional', None),
        'max_queue_size': (4, 'uint32', 'optional', None),
    },
    'inference.ModelReadyRequest': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
    },
    'inference.ModelReadyResponse': {
        'ready': (1, 'bool', 'optional', None),
    },
    'inference.ModelRepositoryParameter': {
        'bool_param': (1, 'bool', 'optional', 'parameter_choice'),
        'int64_param': (2, 'int64', 'optional', 'parameter_choice'),
        'string_param': (3, 'string', 'optional', 'parameter_choice'),
        'bytes_param': (4, 'bytes', 'optional', 'parameter_choice'),
    },
    'inference.ModelStatistics': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
        'last_inference': (3, 'uint64', 'optional', None),
        'inference_count': (4, 'uint64', 'optional', None),
        'execution_count': (5, 'uint64', 'optional', None),
        'inference_stats': (6, 'message:.inference.InferStatistics', 'optional', None),
        'batch_stats': (7, 'message:.inference.InferBatchStatistics', 'repeated', None),
        'memory_usage': (8, 'message:.inference.MemoryUsage', 'repeated', None),
        'response_stats': (9, 'message:.inference.ModelStatistics.ResponseStatsEntry', 'repeated', None),
    },
    'inference.ModelStatistics.ResponseStatsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.InferResponseStatistics', 'optional', None),
    },
    'inference.ModelStatisticsRequest': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
    },
    'inference.ModelStatisticsResponse': {
        'model_stats': (1, 'message:.inference.ModelStatistics', 'repeated', None),
    },
    'inference.ModelStreamInferResponse': {
        'error_message': (1, 'string', 'optional', None),
        'infer_response': (2, 'message:.inference.ModelInferResponse', 'optional', None),
    },
    'inference.ModelTensorReshape': {
        'shape': (1, 'int64', 'repeated', None),
    },
    'inference.ModelTransactionPolicy': {
        'decoupled': (1, 'bool', 'optional', None),
    },
    'inference.ModelVersionPolicy': {
        'latest': (1, 'message:.inference.ModelVersionPolicy.Latest', 'optional', 'policy_choice'),
        'all': (2, 'message:.inference.ModelVersionPolicy.All', 'optional', 'policy_choice'),
        'specific': (3, 'message:.inference.ModelVersionPolicy.Specific', 'optional', 'policy_choice'),
    },
    'inference.ModelVersionPolicy.All': {
    },
    'inference.ModelVersionPolicy.Latest': {
        'num_versions': (1, 'uint32', 'optional', None),
    },
    'inference.ModelVersionPolicy.Specific': {
        'versions': (1, 'int64', 'repeated', None),
    },
    'inference.ModelWarmup': {
        'name': (1, 'string', 'optional', None),
        'batch_size': (2, 'uint32', 'optional', None),
        'inputs': (3, 'message:.inference.ModelWarmup.InputsEntry', 'repeated', None),
        'count': (4, 'uint32', 'optional', None),
    },
    'inference.ModelWarmup.Input': {
        'data_type': (1, 'enum:.inference.DataType', 'optional', None),
        'dims': (2, 'int64', 'repeated', None),
        'zero_data': (3, 'bool', 'optional', 'input_data_type'),
        'random_data': (4, 'bool', 'optional', 'input_data_type'),
        'input_data_file': (5, 'string', 'optional', 'input_data_type'),
    },
    'inference.ModelWarmup.InputsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.ModelWarmup.Input', 'optional', None),
    },
    'inference.RepositoryIndexRequest': {
        'repository_name': (1, 'string', 'optional', None),
        'ready': (2, 'bool', 'optional', None),
    },
    'inference.RepositoryIndexResponse': {
        'models': (1, 'message:.inference.RepositoryIndexResponse.ModelIndex', 'repeated', None),
    },
    'inference.RepositoryIndexResponse.ModelIndex': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
        'state': (3, 'string', 'optional', None),
        'reason': (4, 'string', 'optional', None),
    },
    'inference.RepositoryModelLoadRequest': {
        'repository_name': (1, 'string', 'optional', None),
        'model_name': (2, 'string', 'optional', None),
        'parameters': (3, 'message:.inference.RepositoryModelLoadRequest.ParametersEntry', 'repeated', None),
    },
    'inference.RepositoryModelLoadRequest.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.ModelRepositoryParameter', 'optional', None),
    },
    'inference.RepositoryModelLoadResponse': {
    },
    'inference.RepositoryModelUnloadRequest': {
        'repository_name': (1, 'string', 'optional', None),
        'model_name': (2, 'string', 'optional', None),
        'parameters': (3, 'message:.inference.RepositoryModelUnloadRequest.ParametersEntry', 'repeated', None),
    },
    'inference.RepositoryModelUnloadRequest.ParametersEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.ModelRepositoryParameter', 'optional', None),
    },
    'inference.RepositoryModelUnloadResponse': {
    },
    'inference.ServerLiveRequest': {
    },
    'inference.ServerLiveResponse': {
        'live': (1, 'bool', 'optional', None),
    },
    'inference.ServerMetadataRequest': {
    },
    'inference.ServerMetadataResponse': {
        'name': (1, 'string', 'optional', None),
        'version': (2, 'string', 'optional', None),
        'extensions': (3, 'string', 'repeated', None),
    },
    'inference.ServerReadyRequest': {
    },
    'inference.ServerReadyResponse': {
        'ready': (1, 'bool', 'optional', None),
    },
    'inference.StatisticDuration': {
        'count': (1, 'uint64', 'optional', None),
        'ns': (2, 'uint64', 'optional', None),
    },
    'inference.TraceSettingRequest': {
        'settings': (1, 'message:.inference.TraceSettingRequest.SettingsEntry', 'repeated', None),
        'model_name': (2, 'string', 'optional', None),
    },
    'inference.TraceSettingRequest.SettingValue': {
        'value': (1, 'string', 'repeated', None),
    },
    'inference.TraceSettingRequest.SettingsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.TraceSettingRequest.SettingValue', 'optional', None),
    },
    'inference.TraceSettingResponse': {
        'settings': (1, 'message:.inference.TraceSettingResponse.SettingsEntry', 'repeated', None),
    },
    'inference.TraceSettingResponse.SettingValue': {
        'value': (1, 'string', 'repeated', None),
    },
    'inference.TraceSettingResponse.SettingsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.TraceSettingResponse.SettingValue', 'optional', None),
    },
    # Triton's shared-memory extension (grpc_service.proto)
    'inference.SystemSharedMemoryStatusRequest': {
        'name': (1, 'string', 'optional', None),
    },
    'inference.SystemSharedMemoryStatusResponse': {
        'regions': (1, 'message:.inference.SystemSharedMemoryStatusResponse.RegionsEntry', 'repeated', None),
    },
    'inference.SystemSharedMemoryStatusResponse.RegionStatus': {
        'name': (1, 'string', 'optional', None),
        'key': (2, 'string', 'optional', None),
        'offset': (3, 'uint64', 'optional', None),
        'byte_size': (4, 'uint64', 'optional', None),
    },
    'inference.SystemSharedMemoryStatusResponse.RegionsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.SystemSharedMemoryStatusResponse.RegionStatus', 'optional', None),
    },
    'inference.SystemSharedMemoryRegisterRequest': {
        'name': (1, 'string', 'optional', None),
        'key': (2, 'string', 'optional', None),
        'offset': (3, 'uint64', 'optional', None),
        'byte_size': (4, 'uint64', 'optional', None),
    },
    'inference.SystemSharedMemoryRegisterResponse': {
    },
    'inference.SystemSharedMemoryUnregisterRequest': {
        'name': (1, 'string', 'optional', None),
    },
    'inference.SystemSharedMemoryUnregisterResponse': {
    },
    'inference.CudaSharedMemoryStatusRequest': {
        'name': (1, 'string', 'optional', None),
    },
    'inference.CudaSharedMemoryStatusResponse': {
        'regions': (1, 'message:.inference.CudaSharedMemoryStatusResponse.RegionsEntry', 'repeated', None),
    },
    'inference.CudaSharedMemoryStatusResponse.RegionStatus': {
        'name': (1, 'string', 'optional', None),
        'device_id': (2, 'uint64', 'optional', None),
        'byte_size': (3, 'uint64', 'optional', None),
    },
    'inference.CudaSharedMemoryStatusResponse.RegionsEntry': {
        'key': (1, 'string', 'optional', None),
        'value': (2, 'message:.inference.CudaSharedMemoryStatusResponse.RegionStatus', 'optional', None),
    },
    'inference.CudaSharedMemoryRegisterRequest': {
        'name': (1, 'string', 'optional', None),
        'raw_handle': (2, 'bytes', 'optional', None),
        'device_id': (3, 'int64', 'optional', None),
        'byte_size': (4, 'uint64', 'optional', None),
    },
    'inference.CudaSharedMemoryRegisterResponse': {
    },
    'inference.CudaSharedMemoryUnregisterRequest': {
        'name': (1, 'string', 'optional', None),
    },
    'inference.CudaSharedMemoryUnregisterResponse': {
    },
}

ENUMS = {
    'grpc.health.v1.HealthCheckResponse.ServingStatus': {'UNKNOWN': 0, 'SERVING': 1, 'NOT_SERVING': 2, 'SERVICE_UNKNOWN': 3},
    'inference.DataType': {'TYPE_INVALID': 0, 'TYPE_BOOL': 1, 'TYPE_UINT8': 2, 'TYPE_UINT16': 3, 'TYPE_UINT32': 4, 'TYPE_UINT64': 5, 'TYPE_INT8': 6, 'TYPE_INT16': 7, 'TYPE_INT32': 8, 'TYPE_INT64': 9, 'TYPE_FP16': 10, 'TYPE_FP32': 11, 'TYPE_FP64': 12, 'TYPE_STRING': 13, 'TYPE_BF16': 14},
    'inference.ModelInput.Format': {'FORMAT_NONE': 0, 'FORMAT_NHWC': 1, 'FORMAT_NCHW': 2},
    'inference.ModelInstanceGroup.Kind': {'KIND_AUTO': 0, 'KIND_GPU': 1, 'KIND_CPU': 2, 'KIND_MODEL': 3},
    'inference.ModelQueuePolicy.TimeoutAction': {'REJECT': 0, 'DELAY': 1},
}

RPCS = {
    'grpc.health.v1.Health/Check': ('.grpc.health.v1.HealthCheckRequest', '.grpc.health.v1.HealthCheckResponse', False, False),
    # grpc/grpc health.proto (not in Triton's copy)
    'grpc.health.v1.Health/Watch': ('.grpc.health.v1.HealthCheckRequest', '.grpc.health.v1.HealthCheckResponse', False, True),
    'inference.GRPCInferenceService/LogSettings': ('.inference.LogSettingsRequest', '.inference.LogSettingsResponse', False, False),
    'inference.GRPCInferenceService/ModelConfig': ('.inference.ModelConfigRequest', '.inference.ModelConfigResponse', False, False),
    'inference.GRPCInferenceService/ModelInfer': ('.inference.ModelInferRequest', '.inference.ModelInferResponse', False, False),
    'inference.GRPCInferenceService/ModelMetadata': ('.inference.ModelMetadataRequest', '.inference.ModelMetadataResponse', False, False),
    'inference.GRPCInferenceService/ModelReady': ('.inference.ModelReadyRequest', '.inference.ModelReadyResponse', False, False),
    'inference.GRPCInferenceService/ModelStatistics': ('.inference.ModelStatisticsRequest', '.inference.ModelStatisticsResponse', False, False),
    'inference.GRPCInferenceService/ModelStreamInfer': ('.inference.ModelInferRequest', '.inference.ModelStreamInferResponse', True, True),
    'inference.GRPCInferenceService/RepositoryIndex': ('.inference.RepositoryIndexRequest', '.inference.RepositoryIndexResponse', False, False),
    'inference.GRPCInferenceService/RepositoryModelLoad': ('.inference.RepositoryModelLoadRequest', '.inference.RepositoryModelLoadResponse', False, False),
    'inference.GRPCInferenceService/RepositoryModelUnload': ('.inference.RepositoryModelUnloadRequest', '.inference.RepositoryModelUnloadResponse', False, False),
    'inference.GRPCInferenceService/ServerLive': ('.inference.ServerLiveRequest', '.inference.ServerLiveResponse', False, False),
    'inference.GRPCInferenceService/ServerMetadata': ('.inference.ServerMetadataRequest', '.inference.ServerMetadataResponse', False, False),
    'inference.GRPCInferenceService/ServerReady': ('.inference.ServerReadyRequest', '.inference.ServerReadyResponse', False, False),
    'inference.GRPCInferenceService/SystemSharedMemoryStatus': ('.inference.SystemSharedMemoryStatusRequest', '.inference.SystemSharedMemoryStatusResponse', False, False),
    'inference.GRPCInferenceService/SystemSharedMemoryRegister': ('.inference.SystemSharedMemoryRegisterRequest', '.inference.SystemSharedMemoryRegisterResponse', False, False),
    'inference.GRPCInferenceService/SystemSharedMemoryUnregister': ('.inference.SystemSharedMemoryUnregisterRequest', '.inference.SystemSharedMemoryUnregisterResponse', False, False),
    'inference.GRPCInferenceService/CudaSharedMemoryStatus': ('.inference.CudaSharedMemoryStatusRequest', '.inference.CudaSharedMemoryStatusResponse', False, False),
    'inference.GRPCInferenceService/CudaSharedMemoryRegister': ('.inference.CudaSharedMemoryRegisterRequest', '.inference.CudaSharedMemoryRegisterResponse', False, False),
    'inference.GRPCInferenceService/CudaSharedMemoryUnregister': ('.inference.CudaSharedMemoryUnregisterRequest', '.inference.CudaSharedMemoryUnregisterResponse', False, False),
    'inference.GRPCInferenceService/TraceSetting': ('.inference.TraceSettingRequest', '.inference.TraceSettingResponse', False, False),
}

# ---- inferd's declarations, read through the generated descriptors -----------------

TYPE_NAMES = {getattr(D.FieldDescriptor, k): k[5:].lower()
              for k in dir(D.FieldDescriptor) if k.startswith("TYPE_")}
LABEL_NAMES = {D.FieldDescriptor.LABEL_OPTIONAL: "optional",
               D.FieldDescriptor.LABEL_REPEATED: "repeated",
               D.FieldDescriptor.LABEL_REQUIRED: "required"}


def field_fact(f):
    t = TYPE_NAMES[f.type]
    if f.message_type is not None:
        t += ":." + f.message_type.full_name
    elif f.enum_type is not None:
        t += ":." + f.enum_type.full_name
    oneof = f.containing_oneof.name if f.containing_oneof is not None else None
    return (f.number, t, LABEL_NAMES[f.label], oneof)


def walk(files):
    """Every message (nested and map entries included), enum and RPC the
    files declare: ({name: descriptor}, {name: descriptor}, {name: method})."""
    msgs, enums, rpcs = {}, {}, {}

    def message(m):
        msgs[m.full_name] = m
        for e in m.enum_types:
            enums[e.full_name] = e
        for n in m.nested_types:
            message(n)

    for fd in files:
        for m in fd.message_types_by_name.values():
            message(m)
        for e in fd.enum_types_by_name.values():
            enums[e.full_name] = e
        for s in fd.services_by_name.values():
            for meth in s.methods:
                rpcs[s.full_name + "/" + meth.name] = meth
    return msgs, enums, rpcs


def diff_messages(msgs):
    diffs = []
    for name, m in sorted(msgs.items()):
        facts = MESSAGES.get(name)
        if facts is None:
            diffs.append("%s: not a Triton message" % name)
            continue
        for f in m.fields:
            want = facts.get(f.name)
            got = field_fact(f)
            if want is None:
                diffs.append("%s.%s: not a field of Triton's message" % (name, f.name))
            elif got != want:
                diffs.append("%s.%s: inferd %r, Triton %r" % (name, f.name, got, want))
    return diffs


def diff_enums(enums):
    diffs = []
    for name, e in sorted(enums.items()):
        facts = ENUMS.get(name)
        if facts is None:
            diffs.append("%s: not a Triton enum" % name)
            continue
        for v in e.values:
            if facts.get(v.name) != v.number:
                diffs.append("%s.%s = %d, Triton %r" % (name, v.name, v.number, facts.get(v.name)))
    return diffs


def diff_rpcs(rpcs):
    diffs = []
    for name, m in sorted(rpcs.items()):
        got = ("." + m.input_type.full_name, "." + m.output_type.full_name,
               m.client_streaming, m.server_streaming)
        want = RPCS.get(name)
        if want is None:
            diffs.append("%s: not a Triton RPC" % name)
        elif got != want:
            diffs.append("%s: inferd %r, Triton %r" % (name, got, want))
    return diffs


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    pb, hpb = generate(tmp_path_factory.mktemp("proto_py"))
    return walk([pb.DESCRIPTOR, hpb.DESCRIPTOR])


def test_messages_and_fields_match_triton(declared):
    msgs, _, _ = declared
    assert len(msgs) > 40
    diffs = diff_messages(msgs)
    assert not diffs, "\n".join(diffs)


def test_enums_match_triton(declared):
    _, enums, _ = declared
    assert set(enums) >= {"inference.DataType", "grpc.health.v1.HealthCheckResponse.ServingStatus"}
    diffs = diff_enums(enums)
    assert not diffs, "\n".join(diffs)


def test_rpcs_match_triton(declared):
    _, _, rpcs = declared
    assert "inference.GRPCInferenceService/ModelStreamInfer" in rpcs
    diffs = diff_rpcs(rpcs)
    assert not diffs, "\n".join(diffs)


# Issue 19's bug (ModelWarmup.Input numbered 2..6), an unknown field, a
# renumbered enum value and a unary RPC declared as streaming: each is reported.
DRIFTED_PROTO = """
syntax = "proto3";
package inference;
enum DataType { TYPE_INVALID = 0; TYPE_BOOL = 2; }
message ModelWarmup {
  message Input {
    DataType data_type = 2;
    repeated int64 dims = 3;
    oneof input_data_type { bool zero_data = 4; }
    int32 extra = 9;
  }
}
message ServerLiveRequest {}
message ServerLiveResponse { bool live = 1; }
service GRPCInferenceService {
  rpc ServerLive(ServerLiveRequest) returns (stream ServerLiveResponse) {}
}
"""


def test_drift_is_reported(tmp_path):
    (tmp_path / "drifted.proto").write_text(DRIFTED_PROTO)
    subprocess.run(["protoc", "--descriptor_set_out=%s" % (tmp_path / "d.pb"), "-I",
                    str(tmp_path), str(tmp_path / "drifted.proto")], check=True)
    fds = descriptor_pb2.FileDescriptorSet()
    fds.ParseFromString((tmp_path / "d.pb").read_bytes())
    # A pool of its own: the names clash with the real package's.
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fds.file[0])
    msgs, enums, rpcs = walk([pool.FindFileByName("drifted.proto")])
    assert diff_messages(msgs) == [
        "inference.ModelWarmup.Input.data_type: inferd (2, 'enum:.inference.DataType', "
        "'optional', None), Triton (1, 'enum:.inference.DataType', 'optional', None)",
        "inference.ModelWarmup.Input.dims: inferd (3, 'int64', 'repeated', None), "
        "Triton (2, 'int64', 'repeated', None)",
        "inference.ModelWarmup.Input.zero_data: inferd (4, 'bool', 'optional', "
        "'input_data_type'), Triton (3, 'bool', 'optional', 'input_data_type')",
        "inference.ModelWarmup.Input.extra: not a field of Triton's message",
    ]
    assert diff_enums(enums) == ["inference.DataType.TYPE_BOOL = 2, Triton 1"]
    assert diff_rpcs(rpcs) == [
        "inference.GRPCInferenceService/ServerLive: inferd ('.inference.ServerLiveRequest', "
        "'.inference.ServerLiveResponse', False, True), Triton ('.inference.ServerLiveRequest', "
        "'.inference.ServerLiveResponse', False, False)"]
